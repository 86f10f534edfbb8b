// The job with a device: batches through the copy stage (and the normalize) as the
// pipeline's last stage, in-process on the CPU device and through the real `brigade`
// binary; `--device cuda:0` where CUDA or a GPU is missing.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "launch/loader/job.h"
#include "launch/loader/job_settings.h"
#include "launch/loader/sources.h"
#include "media/synthetic.h"
#include "media/transform.h"
#include "transport/device/device.h"
#include "transport/device/device_normalize.h"

namespace brigade::launch {
namespace {

namespace fs = std::filesystem;

class DeviceRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ =
        fs::temp_directory_path() / ("brigade-device-" + std::to_string(std::random_device{}()));
    fs::create_directories(root_ / "data");
    for (int i = 0; i < 13; ++i) {
      auto bytes = media::make_image(media::ImageCodec::jpeg, 90 + 7 * i, 80, i);
      if (i == 5) bytes.resize(bytes.size() / 3);  // corrupt: a batch with a hole
      media::write_file((root_ / "data" / ("img-" + std::to_string(10 + i) + ".jpg")).string(),
                        bytes);
    }
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  static RunConfig config(const std::string& device, Normalize normalize = Normalize::none) {
    RunConfig c;
    c.data = (root_ / "data").string();
    c.batch_size = 4;
    c.threads = 2;
    c.device = device;
    c.normalize = normalize;
    resolve(c, [](const char*) -> const char* { return nullptr; });
    return c;
  }

  // Each delivered batch's ids, with its bytes: the host tensor's, or (CPU device) the
  // device batch's, which is host memory.
  static std::map<std::vector<std::uint64_t>, std::vector<std::uint8_t>> run(const RunConfig& c) {
    std::map<std::vector<std::uint64_t>, std::vector<std::uint8_t>> out;
    const auto summary =
        run_job(c, list_folder(c.data, MediaKind::image), {.on_batch = [&](const JobBatch& b) {
                  const bool on_device = b.device.defined();
                  EXPECT_EQ(on_device, !c.device.empty());
                  if (on_device) {
                    EXPECT_TRUE(b.device.ready());  // waited for
                  }
                  const auto* p =
                      static_cast<const std::uint8_t*>(on_device ? b.device.data() : b.data.data());
                  const auto n = on_device ? b.device.nbytes() : b.data.nbytes();
                  out[b.ids].assign(p, p + n);
                }});
    EXPECT_EQ(summary.end, JobEnd::finished) << summary.failure;
    EXPECT_EQ(summary.counts.samples, 12u);
    EXPECT_EQ(summary.counts.failed, 1u);
    return out;
  }

  static inline fs::path root_;
};

TEST_F(DeviceRun, CpuDeviceDeliversTheHostBatchesBitForBit) {
  const auto host = run(config(""));
  const auto device = run(config("cpu"));
  EXPECT_EQ(device, host);
  EXPECT_EQ(device.size(), 4u);  // 13 samples in batches of 4, sample 5 left out
}

TEST_F(DeviceRun, NormalizesOnTheDevice) {
  const auto host = run(config(""));
  auto c = config("cpu", Normalize::imagenet);
  c.normalize_dtype = media::DType::float16;
  c.layout = Layout::nchw;
  const auto normalized = run(c);
  ASSERT_EQ(normalized.size(), host.size());
  const transport::NormalizeOptions imagenet{.mean = {0.485f, 0.456f, 0.406f},
                                             .stddev = {0.229f, 0.224f, 0.225f},
                                             .scale = 1.0f / 255.0f,
                                             .dtype = media::DType::float16};
  for (const auto& [ids, bytes] : host) {
    const std::vector<std::int64_t> shape{static_cast<std::int64_t>(ids.size()), 224, 224, 3};
    auto job = transport::make_normalize_job(imagenet, shape);
    std::vector<std::uint8_t> expected(transport::normalized_bytes(job));
    job.src = bytes.data();
    job.dst = expected.data();
    transport::normalize_reference(job);
    EXPECT_TRUE(normalized.at(ids) == expected) << "batch starting with " << ids[0];
  }
}

// Issue 22 item 6, the pinned bound: a job whose direct pinned pool would exceed
// pinned_direct_mib (0 here) decodes into ordinary memory and the copy stage stages
// each batch through its pinned ring; the batches are the same bits, normalized or not.
TEST_F(DeviceRun, OverThePinnedBoundBatchesAreStagedAndIdentical) {
  const auto host = run(config(""));
  auto staged = config("cpu");
  staged.pinned_direct_mib = 0;
  EXPECT_EQ(run(staged), host);
  auto direct = config("cpu", Normalize::imagenet);
  auto both = config("cpu", Normalize::imagenet);
  both.pinned_direct_mib = 0;
  EXPECT_EQ(run(both), run(direct));
}

// One CPU normalize (media/normalize.h): the decode stage normalizing on the host
// (`normalize` without a device) and the CPU device's normalize give the same bits, in
// both layouts, with ImageNet's and other statistics.
TEST_F(DeviceRun, HostAndCpuDeviceNormalizeAreBitIdentical) {
  for (auto layout : {Layout::nhwc, Layout::nchw}) {
    for (const bool imagenet : {true, false}) {
      auto host = config("", Normalize::imagenet);
      auto device = config("cpu", Normalize::imagenet);
      for (auto* c : {&host, &device}) {
        c->layout = layout;
        if (!imagenet) {
          c->normalize_mean = {0.3f, 0.7f, 0.11f};
          c->normalize_std = {0.17f, 0.31f, 0.07f};
        }
      }
      const auto on_host = run(host);
      const auto on_device = run(device);
      ASSERT_EQ(on_host.size(), 4u);
      EXPECT_TRUE(on_host == on_device) << media::layout_name(layout) << " imagenet " << imagenet;
    }
  }
}

// A consumer (the Python Loader's batches) may keep device batches after the job that
// made them is gone, mid-epoch: their memory stays valid and is freed when they are.
TEST_F(DeviceRun, DeviceBatchesOutliveTheirJobStoppedMidEpoch) {
  const auto host = run(config(""));
  for (int round = 0; round < 20; ++round) {
    std::vector<JobBatch> kept;
    {
      auto c = config("cpu");
      Job job(c, list_folder(c.data, MediaKind::image));
      job.begin_epoch();
      for (int i = 0; i < (round % 3) + 1; ++i) {
        auto r = job.next(std::chrono::seconds(30));
        ASSERT_EQ(r.status, JobStatus::batch);
        kept.push_back(std::move(*r.batch));
      }
    }  // the job, its copy stage, pools and device handle go; the batches stay
    for (const auto& b : kept) {
      b.device.wait();
      const auto* p = static_cast<const std::uint8_t*>(b.device.data());
      EXPECT_EQ(std::vector<std::uint8_t>(p, p + b.device.nbytes()), host.at(b.ids));
    }
  }
}

TEST_F(DeviceRun, WithoutADeviceNormalizingRunsOnTheCpuAsFloat32) {
  const auto host = run(config(""));
  for (auto layout : {Layout::nhwc, Layout::nchw}) {
    auto c = config("", Normalize::imagenet);
    c.layout = layout;
    c.normalize_mean = {0.5f, 0.4f, 0.3f};
    c.normalize_std = {0.2f, 0.25f, 0.3f};
    const auto normalized = run(c);
    ASSERT_EQ(normalized.size(), host.size());
    for (const auto& [ids, bytes] : host) {
      const std::int64_t n = static_cast<std::int64_t>(ids.size());
      const auto in = media::Tensor(media::DType::uint8, {n, 224, 224, 3}, nullptr,
                                    const_cast<std::uint8_t*>(bytes.data()));
      auto want =
          media::Tensor::empty(media::DType::float32,
                               layout == Layout::nchw ? std::vector<std::int64_t>{n, 3, 224, 224}
                                                      : std::vector<std::int64_t>{n, 224, 224, 3});
      media::normalize_into(in, {c.normalize_mean, c.normalize_std}, want);
      const auto& got = normalized.at(ids);
      ASSERT_EQ(got.size(), want.nbytes());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0) << ids[0];
    }
  }
  // float16 is the device's: on the CPU it is a usage error naming the key.
  RunConfig c;
  c.normalize = Normalize::imagenet;
  c.normalize_dtype = media::DType::float16;
  try {
    resolve(c, [](const char*) -> const char* { return nullptr; });
    ADD_FAILURE() << "float16 without a device was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("normalize_dtype float16"), std::string::npos) << e.what();
  }
}

struct Result {
  int code = -1;
  std::string out, err;
};

Result brigade_run(const std::string& args, const fs::path& dir) {
  fs::create_directories(dir);
  const std::string cmd = "'" BRIGADE_BINARY "' run " + args + " --no-progress --threads 2 > '" +
                          (dir / "out").string() + "' 2> '" + (dir / "err").string() + "'";
  const int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::stringstream out, err;
  out << std::ifstream(dir / "out").rdbuf();
  err << std::ifstream(dir / "err").rdbuf();
  r.out = out.str();
  r.err = err.str();
  return r;
}

std::string read_text(const fs::path& p) {
  std::stringstream s;
  s << std::ifstream(p).rdbuf();
  return s.str();
}

TEST_F(DeviceRun, BrigadeRunWithTheCpuDeviceRunsTheWholePath) {
  const auto dir = root_ / "cli";
  const std::string data = "--data '" + (root_ / "data").string() + "' --batch-size 4 --seed 9";
  const auto plain = brigade_run(data + " --ids-out '" + (dir / "plain").string() + "'", dir);
  ASSERT_EQ(plain.code, 0) << plain.err;
  const auto r = brigade_run(data + " --device cpu --normalize imagenet --json --ids-out '" +
                                 (dir / "device").string() + "'",
                             dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read_text(dir / "device"), read_text(dir / "plain"));  // same batches, same order
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["samples"], 12);
  EXPECT_EQ(json["failed"], 1);
  std::vector<std::string> stages;
  for (const auto& s : json["stages"]) stages.push_back(s["name"]);
  EXPECT_EQ(stages, (std::vector<std::string>{"read", "batch", "decode", "to_device"}));
}

TEST_F(DeviceRun, BadDeviceNamesAreUsageErrors) {
  const auto r = brigade_run("--device gpu0", root_ / "bad");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--device: device: expected cpu, cuda or cuda:N, got 'gpu0'"),
            std::string::npos)
      << r.err;
  const auto n = brigade_run("--normalize imagenet --normalize-dtype float16", root_ / "bad");
  EXPECT_EQ(n.code, 2);
  EXPECT_NE(n.err.find("needs --device"), std::string::npos) << n.err;
}

// Without CUDA in the build: exit 2, "this build has no CUDA". With CUDA but no usable
// GPU (CI, this machine): exit 2 with CUDA's reason.
TEST_F(DeviceRun, CudaWhereThereIsNoneExits2SayingWhy) {
  const auto available = transport::cuda_availability();
  if (available.devices > 0) GTEST_SKIP() << "a GPU is present";
  const auto r =
      brigade_run("--data '" + (root_ / "data").string() + "' --device cuda:0", root_ / "cuda");
  EXPECT_EQ(r.code, 2) << r.err;
  const std::string why =
      transport::built_with_cuda() ? available.reason : "this build has no CUDA";
  EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
}

}  // namespace
}  // namespace brigade::launch
