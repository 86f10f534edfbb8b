// run_job in-process: the batch tensors hold exactly what media decodes per sample.
#include "launch/job.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <random>

#include "media/image.h"
#include "media/synthetic.h"
#include "media/transform.h"

namespace brigade::launch {
namespace {

namespace fs = std::filesystem;

class Job : public ::testing::TestWithParam<std::tuple<Layout, actors::Order>> {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("brigade-job-" + std::to_string(std::random_device{}()));
    fs::create_directories(root_);
    for (int i = 0; i < 11; ++i) {
      auto bytes = media::make_image(media::ImageCodec::jpeg, 100 + 10 * i, 90, i);
      if (i == 4) bytes.resize(bytes.size() / 3);  // corrupt
      media::write_file((root_ / ("img-" + std::to_string(10 + i) + ".jpg")).string(), bytes);
    }
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }
  static inline fs::path root_;
};

TEST_P(Job, BatchesHoldEachSampleAsDecodedAlone) {
  const auto [layout, order] = GetParam();
  RunConfig c;
  c.batch_size = 3;
  c.threads = 2;
  c.layout = layout;
  c.order = order;
  c.shuffle = false;  // sample 4 fails mid-batch (3, 4, 5): 5 moves into its slot
  resolve(c, [](const char*) -> const char* { return nullptr; });
  const auto dataset = list_folder(root_.string(), MediaKind::image);
  std::vector<std::uint64_t> seen;
  const auto summary = run_job(
      c, dataset, {.on_batch = [&](const JobBatch& b) {
        const auto& ids = b.ids;
        const auto& batch = b.data;
        ASSERT_EQ(batch.dim(0), static_cast<std::int64_t>(ids.size()));
        const std::vector<std::int64_t> image = layout == Layout::nchw
                                                    ? std::vector<std::int64_t>{3, 224, 224}
                                                    : std::vector<std::int64_t>{224, 224, 3};
        ASSERT_EQ(std::vector<std::int64_t>(batch.shape().begin() + 1, batch.shape().end()), image);
        for (std::size_t i = 0; i < ids.size(); ++i) {
          const auto expected = media::load_transformed(media::Source::file(dataset.files[ids[i]]),
                                                        media::TransformOptions{}, ids[i]);
          const auto* got =
              static_cast<const std::uint8_t*>(batch[static_cast<std::int64_t>(i)].data());
          const auto* want = static_cast<const std::uint8_t*>(expected.data());
          bool same = true;
          for (int p = 0; p < 224 * 224 && same; ++p) {
            for (int k = 0; k < 3; ++k) {
              const auto g = layout == Layout::nchw ? got[k * 224 * 224 + p] : got[p * 3 + k];
              same = same && g == want[p * 3 + k];
            }
          }
          EXPECT_TRUE(same) << "sample " << ids[i];
          seen.push_back(ids[i]);
        }
      }});
  EXPECT_EQ(summary.counts.failed, 1u);
  EXPECT_EQ(summary.counts.samples, 10u);
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{0, 1, 2, 3, 5, 6, 7, 8, 9, 10}));
}

INSTANTIATE_TEST_SUITE_P(LayoutsAndOrders, Job,
                         ::testing::Combine(::testing::Values(Layout::nhwc, Layout::nchw),
                                            ::testing::Values(actors::Order::input,
                                                              actors::Order::completion)));

TEST(Dataset, ErrorsNameTheFolderOrListAndCarryTheirKey) {
  const auto dir = fs::temp_directory_path() / ("brigade-dataset-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto error = [](const std::function<void()>& fn) -> std::pair<std::string, std::string> {
    try {
      fn();
    } catch (const ConfigError& e) {
      return {e.what(), e.key()};
    }
    return {"(no error)", ""};
  };
  const auto missing = (dir / "missing").string();
  auto [what, key] = error([&] { list_folder(missing, MediaKind::image); });
  EXPECT_EQ(key, "data");
  EXPECT_NE(what.find(missing), std::string::npos) << what;
  std::tie(what, key) = error([&] { list_folder(dir.string(), MediaKind::image); });
  EXPECT_EQ(key, "data");
  EXPECT_NE(what.find("no image files"), std::string::npos) << what;
  std::tie(what, key) = error([&] { read_list(missing); });
  EXPECT_EQ(key, "list");
  EXPECT_NE(what.find("cannot read"), std::string::npos) << what;
  const auto blank = (dir / "blank.txt").string();
  media::write_file(blank, std::vector<std::uint8_t>{'\n', ' ', '\n'});
  std::tie(what, key) = error([&] { read_list(blank); });
  EXPECT_EQ(key, "list");
  EXPECT_NE(what.find("no paths"), std::string::npos) << what;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace brigade::launch
