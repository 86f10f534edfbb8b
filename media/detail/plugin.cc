#include "media/detail/plugin.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>

#include "media/errors.h"

namespace brigade::media::detail {
namespace {

using EntryFn = const FfmpegPlugin* (*)(int, const std::error_category*);

struct Loaded {
  const FfmpegPlugin* plugin = nullptr;
  std::string error;  // why not, when plugin is null
};

std::atomic<bool> loaded_flag{false};

// Tries one candidate: the plugin, or nullptr with `why` set.
const FfmpegPlugin* try_open(const std::string& path, std::string& why) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = dlerror();
    why = e ? e : "dlopen failed";
    return nullptr;
  }
  auto entry = reinterpret_cast<EntryFn>(dlsym(handle, kPluginEntry));
  const FfmpegPlugin* plugin = entry ? entry(kPluginAbi, &media_category()) : nullptr;
  if (plugin == nullptr) {
    why = entry ? "built for another interface version (not this build's plugin)"
                : std::string("no symbol ") + kPluginEntry;
    dlclose(handle);
  }
  return plugin;  // the handle stays open for the life of the process
}

std::vector<std::string> candidates() {
  if (const char* env = std::getenv(kPluginEnv); env != nullptr && *env != '\0') return {env};
  std::vector<std::string> paths;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&ffmpeg_plugin_loaded), &info) != 0 &&
      info.dli_fname != nullptr && *info.dli_fname == '/') {
    const std::filesystem::path dir = std::filesystem::path(info.dli_fname).parent_path();
    paths.push_back((dir / kPluginFile).string());
    paths.push_back(
        (dir / ".." / BRIGADE_INSTALL_LIBDIR / kPluginFile).lexically_normal().string());
  }
  paths.emplace_back(kPluginFile);  // through the program's RUNPATH
  // The build tree's plugin: a sanitizer's dlopen interceptor is the caller dlopen sees,
  // so the program's RUNPATH is not searched there (and dladdr names a program by argv[0]).
  paths.emplace_back(std::string(BRIGADE_BUILD_PLUGIN_DIR) + "/" + kPluginFile);
  return paths;
}

Loaded load() {
  Loaded out;
  std::string tried;
  for (const std::string& path : candidates()) {
    std::string why;
    out.plugin = try_open(path, why);
    if (out.plugin != nullptr) {
      loaded_flag.store(true);
      return out;
    }
    // dlerror's text usually begins with the path already.
    tried += (tried.empty() ? "" : "; ") + (why.rfind(path, 0) == 0 ? why : path + ": " + why);
  }
  out.error = std::string("FFmpeg decoding needs the plugin ") + kPluginFile +
              ", which did not load (" + kPluginEnv + " names it): tried " + tried;
  return out;
}

}  // namespace

const FfmpegPlugin& ffmpeg_plugin(const std::string& input) {
  static const Loaded loaded = load();
  if (loaded.plugin == nullptr) throw MediaError(ErrorCode::unsupported, input, loaded.error);
  return *loaded.plugin;
}

bool ffmpeg_plugin_loaded() noexcept { return loaded_flag.load(); }

}  // namespace brigade::media::detail
