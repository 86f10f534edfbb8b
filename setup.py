"""Builds the brigade Python package with CMake (python/CMakeLists.txt).

`pip install --no-build-isolation .` from the source tree (Debian 12: python3-pip,
python3-setuptools, python3-dev, pybind11-dev and Brigade's build dependencies,
scripts/install-deps.sh). The extension module brigade._brigade links Brigade's
libraries statically, so the installed package needs only the shared libraries of
Brigade's dependencies (CAF, Cap'n Proto, FFmpeg, ...), found by the system's loader.

Environment: BRIGADE_CMAKE_ARGS (extra CMake arguments), BRIGADE_BUILD_JOBS (parallel
build jobs, default: the number of cores).
"""

import os
import shlex
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def version():
    for line in (ROOT / "CMakeLists.txt").read_text().splitlines():
        if line.startswith("project(brigade VERSION "):
            return line.split()[2]
    raise RuntimeError("CMakeLists.txt: no project(brigade VERSION ...) line")


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    """Configures a CMake tree in build_temp and builds the module into the package."""

    def build_extension(self, ext):
        out = Path(self.get_ext_fullpath(ext.name)).resolve().parent
        tree = Path(self.build_temp).resolve() / "cmake"
        tree.mkdir(parents=True, exist_ok=True)
        args = [
            "cmake", "-S", str(ROOT), "-B", str(tree), "-DCMAKE_BUILD_TYPE=Release",
            f"-DPython_EXECUTABLE={sys.executable}", "-DBRIGADE_BUILD_TESTS=OFF",
            "-DBRIGADE_BUILD_BENCH=OFF", "-DBRIGADE_PYTHON=ON",
        ] + shlex.split(os.environ.get("BRIGADE_CMAKE_ARGS", ""))
        subprocess.run(args, check=True)
        jobs = os.environ.get("BRIGADE_BUILD_JOBS", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "--build", str(tree), "--target", "brigade_python", "-j", jobs],
                       check=True)
        built = next((tree / "python" / "brigade").glob("_brigade*.so"), None)
        if built is None:
            raise RuntimeError(
                f"{tree}: the brigade_python target was not built (CMake found no pybind11 "
                "or Python development files: apt-get install pybind11-dev python3-dev)")
        out.mkdir(parents=True, exist_ok=True)
        self.copy_file(str(built), self.get_ext_fullpath(ext.name))
        # media's FFmpeg plugin, loaded from next to the module (media/detail/plugin.h).
        self.copy_file(str(built.parent / "libbrigade_media_ffmpeg.so"), str(out))


setup(
    name="brigade",
    version=version(),
    description="Brigade: a C++ data loader for ML training (actor pipeline, FFmpeg decode)",
    python_requires=">=3.9",
    packages=["brigade"],
    package_dir={"": "python"},
    package_data={"brigade": ["py.typed", "*.pyi"]},
    ext_modules=[CMakeExtension("brigade._brigade")],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
