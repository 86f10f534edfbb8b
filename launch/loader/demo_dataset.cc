#include "launch/loader/demo_dataset.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "media/source.h"
#include "media/synthetic.h"

namespace brigade::launch {
namespace fs = std::filesystem;

fs::path default_demo_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    return fs::path(xdg) / "brigade" / "demo";
  }
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : ".") / ".cache" / "brigade" / "demo";
}

namespace {

// Sizes around 500x375 as in ImageNet: both orientations, even dimensions.
std::pair<int, int> image_size(int i) {
  const int w = 400 + (i * 37) % 201;  // 400..600
  const int h = 300 + (i * 53) % 151;  // 300..450
  return i % 5 == 0 ? std::pair{h & ~1, w & ~1} : std::pair{w & ~1, h & ~1};
}

// Demo image i's class is i % 10; its pixels are cast toward the class's colour (a
// quarter of the way), so that a small model can learn the classes.
constexpr std::array<std::array<int, 3>, kDemoClasses> kClassColours{{{230, 25, 75},
                                                                      {60, 180, 75},
                                                                      {255, 225, 25},
                                                                      {0, 130, 200},
                                                                      {245, 130, 48},
                                                                      {145, 30, 180},
                                                                      {70, 240, 240},
                                                                      {240, 50, 230},
                                                                      {128, 128, 0},
                                                                      {0, 0, 128}}};

media::Bytes demo_image(int i, int width, int height) {
  auto rgb = media::synthetic_rgb(width, height, static_cast<std::uint64_t>(i));
  const auto& colour = kClassColours[static_cast<std::size_t>(i % kDemoClasses)];
  for (std::size_t p = 0; p < rgb.size(); ++p)
    rgb[p] = static_cast<std::uint8_t>((3 * rgb[p] + colour[p % 3]) / 4);
  return media::encode_jpeg(rgb, width, height);
}

void generate(const fs::path& dir, const DemoDatasetOptions& options) {
  const int total = options.images + options.clips;
  std::atomic<int> next{0};
  std::atomic<bool> failed{false};
  std::string error;
  std::mutex error_mutex;
  auto work = [&] {
    for (int i = next++; i < total && !failed; i = next++) {
      try {
        if (i < options.images) {
          const auto [w, h] = image_size(i);
          const auto path =
              dir / "images" / demo_class_name(i % kDemoClasses) / fmt::format("img-{:05d}.jpg", i);
          media::write_file(path.string(), demo_image(i, w, h));
        } else {
          const int c = i - options.images;
          media::VideoSpec spec{.codec = media::VideoCodec::h264,
                                .width = 320,
                                .height = 240,
                                .frames = 48,
                                .fps = 24,
                                .gop = 24,
                                .b_frames = 2,
                                .seed = static_cast<std::uint64_t>(c)};
          const auto path = dir / "videos" / fmt::format("clip-{:02d}.mp4", c);
          media::write_file(path.string(), media::make_video(spec));
        }
      } catch (const std::exception& e) {
        std::lock_guard lock(error_mutex);
        error = e.what();
        failed = true;
      }
    }
  };
  const int threads =
      options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
  std::vector<std::jthread> pool;
  for (int t = 0; t < std::max(1, threads); ++t) pool.emplace_back(work);
  pool.clear();
  if (failed)
    throw std::runtime_error("generating the demo dataset in " + dir.string() + ": " + error);
}

}  // namespace

std::string demo_class_name(int c) { return fmt::format("class-{}", c); }

fs::path ensure_demo_dataset(const fs::path& dir, const DemoDatasetOptions& options) {
  const auto marker = dir / ".complete";
  const std::string expected =
      fmt::format("images={} clips={} v2\n", options.images, options.clips);
  std::error_code ec;
  if (fs::exists(marker, ec) && media::read_file(marker.string()) ==
                                    std::vector<std::uint8_t>(expected.begin(), expected.end())) {
    return dir;
  }
  spdlog::info("brigade: generating the demo dataset ({} images, {} clips) in {}", options.images,
               options.clips, dir.string());
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto* sub : {"images", "videos"}) {
    fs::create_directories(dir / sub, ec);
    if (ec) throw std::runtime_error("cannot create " + (dir / sub).string() + ": " + ec.message());
  }
  // A v1 cache's 16 bucket folders would be classes of no file (an error of labels =
  // folder): the images are regenerated from scratch.
  fs::remove_all(dir / "images", ec);
  for (int c = 0; c < kDemoClasses; ++c) {
    fs::create_directories(dir / "images" / demo_class_name(c), ec);
    if (ec)
      throw std::runtime_error("cannot create " + (dir / "images").string() + ": " + ec.message());
  }
  generate(dir, options);
  media::write_file(marker.string(), std::vector<std::uint8_t>(expected.begin(), expected.end()));
  spdlog::info("brigade: demo dataset ready in {:.1f} s",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return dir;
}

fs::path demo_folder(MediaKind kind) {
  return ensure_demo_dataset(default_demo_dir()) / (kind == MediaKind::video ? "videos" : "images");
}

std::vector<std::string> write_synthetic_images(const fs::path& folder,
                                                const SyntheticImages& images) {
  if (images.codec != "jpeg" && images.codec != "png") {
    throw std::invalid_argument(
        fmt::format("codec: expected 'jpeg' or 'png', got '{}'", images.codec));
  }
  if (images.count < 0 || images.width < 1 || images.height < 1)
    throw std::invalid_argument("count must be >= 0, width and height >= 1");
  const bool jpeg = images.codec == "jpeg";
  fs::create_directories(folder);
  std::vector<std::string> paths;
  for (int i = 0; i < images.count; ++i) {
    auto path = (folder / fmt::format("img-{:05}{}", i, jpeg ? ".jpg" : ".png")).string();
    media::write_file(
        path,
        media::make_image(jpeg ? media::ImageCodec::jpeg : media::ImageCodec::png, images.width,
                          images.height, images.seed + static_cast<std::uint64_t>(i)));
    paths.push_back(std::move(path));
  }
  return paths;
}

}  // namespace brigade::launch
