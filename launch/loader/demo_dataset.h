#pragma once

// The demo dataset `brigade run` uses when given no data: synthetic media made by
// media/'s generator (the project ships no binary media), generated once and cached.
//
// Layout: <cache>/images/class-C/img-NNNNN.jpg (2,000 JPEGs of varied sizes around
// 500x375, textured and noisy, quality 90, 4:2:0; image N in class N % 10, its colours
// cast toward its class's so that a model can learn them: `labels = folder` makes a
// 10-class set of 200 images per class) and <cache>/videos/clip-NN.mp4 (32 two-second
// H.264 clips). A `.complete` marker, written last and atomically, tells a finished
// cache from one interrupted mid-way or of an older layout (regenerated).

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "launch/loader/job_config.h"

namespace brigade::launch {

/// The demo images' classes: class-0 … class-9 (demo_class_name).
inline constexpr int kDemoClasses = 10;
std::string demo_class_name(int c);

struct DemoDatasetOptions {
  int images = 2000;
  int clips = 32;
  int threads = 0;  // 0: all cores
};

/// `$XDG_CACHE_HOME/brigade/demo`, else `~/.cache/brigade/demo`.
std::filesystem::path default_demo_dir();

/// Returns `dir`, generating the dataset there first unless it is complete.
/// Throws std::runtime_error naming the path on I/O errors.
std::filesystem::path ensure_demo_dataset(const std::filesystem::path& dir,
                                          const DemoDatasetOptions& options = {});

/// The folder of the demo dataset's `kind` (images or videos) under default_demo_dir(),
/// generated first unless complete (ensure_demo_dataset): what a job without data lists.
std::filesystem::path demo_folder(MediaKind kind);

/// Small synthetic images for tests and examples (media/synthetic.h's generator):
/// `folder`/img-NNNNN.jpg (or .png), `count` of them, image i drawn from seed + i.
struct SyntheticImages {
  int count = 0;
  int width = 64;
  int height = 48;
  std::uint64_t seed = 0;
  std::string_view codec = "jpeg";  // or "png"
};
/// Writes them (creating `folder`) and returns their paths in order. Throws
/// std::invalid_argument for a codec other than jpeg or png, a negative count or a
/// size below 1; std::runtime_error on I/O errors.
std::vector<std::string> write_synthetic_images(const std::filesystem::path& folder,
                                                const SyntheticImages& images);

}  // namespace brigade::launch
