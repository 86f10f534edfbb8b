# bench_decode: image (decode + ImageNet eval transform) and video (8 evenly
# spaced frames per clip) decode throughput, against TurboJPEG + swscale and
# FFmpeg references in the same run.
brigade_add_bench(bench_decode SOURCES bench_decode.cc DEPS brigade_media PkgConfig::TURBOJPEG PkgConfig::FFMPEG)
