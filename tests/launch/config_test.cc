#include "launch/config.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>

#include "launch/loader/decode.h"

namespace brigade::launch {
namespace {

Getenv env(std::map<std::string, std::string> vars) {
  auto held = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [held](const char* name) -> const char* {
    auto it = held->find(name);
    return it == held->end() ? nullptr : it->second.c_str();
  };
}

// The ConfigError `fn` throws, if any.
std::optional<ConfigError> config_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e;
  }
  return std::nullopt;
}

std::string error_of(const std::function<void()>& fn) {
  const auto e = config_error(fn);
  return e ? e->what() : "(no error)";
}

// The key a ConfigError is about, or "(no error)".
std::string key_of(const std::function<void()>& fn) {
  const auto e = config_error(fn);
  return e ? e->key() : "(no error)";
}

TEST(Config, DefaultsAfterResolve) {
  RunCommand c;
  resolve(c, env({}));
  EXPECT_EQ(*c.batch_size, 32);
  EXPECT_EQ(*c.rank, 0u);
  EXPECT_EQ(*c.world_size, 1u);
  EXPECT_EQ(c.epochs, 1u);
  EXPECT_TRUE(c.shuffle);
  EXPECT_EQ(c.seed, 0u);
  EXPECT_EQ(c.order, actors::Order::input);
  EXPECT_GE(*c.threads, 1);
  EXPECT_EQ(*c.decode_concurrency, *c.threads);
  EXPECT_EQ(c.read_concurrency, 8);
  EXPECT_TRUE(c.failure_budget.is_unlimited());
}

TEST(Config, VideoBatchDefaultsToEight) {
  RunCommand c;
  apply_flag(c, "--kind", "video");
  resolve(c, env({}));
  EXPECT_EQ(c.kind, MediaKind::video);
  EXPECT_EQ(*c.batch_size, 8);
}

TEST(Config, TomlKeysAndTables) {
  RunCommand c;
  apply_toml(c, R"(
batch_size = 16
epochs = 3
seed = 7
shuffle = false
order = "completion"
max_failures = "5%"
layout = "nchw"
[stages.read]
concurrency = 4
[stages.decode]
concurrency = 2
)",
             "/etc/job/run.toml");
  resolve(c, env({}));
  EXPECT_EQ(*c.batch_size, 16);
  EXPECT_EQ(c.epochs, 3u);
  EXPECT_EQ(c.seed, 7u);
  EXPECT_FALSE(c.shuffle);
  EXPECT_EQ(c.order, actors::Order::completion);
  EXPECT_TRUE(c.failure_budget.exceeded(6, 100));
  EXPECT_FALSE(c.failure_budget.exceeded(5, 100));
  EXPECT_EQ(c.failure_budget.max_rate(), 0.05);  // stored once, as the budget
  EXPECT_EQ(c.layout, Layout::nchw);
  EXPECT_EQ(c.read_concurrency, 4);
  EXPECT_EQ(*c.decode_concurrency, 2);
}

TEST(Config, RelativePathsInTomlResolveAgainstItsFolder) {
  RunCommand c;
  apply_toml(c, "data = \"images\"\nids_out = \"/tmp/ids.txt\"\n", "/etc/job/run.toml");
  EXPECT_EQ(c.data, "/etc/job/images");
  EXPECT_EQ(c.ids_out, "/tmp/ids.txt");
}

TEST(Config, FlagsOverrideTheFile) {
  RunCommand c;
  apply_toml(c, "batch_size = 16\nshuffle = false\n[stages.decode]\nconcurrency = 2\n", "run.toml");
  apply_flag(c, "--batch-size", "64");
  apply_flag(c, "--shuffle", "");
  apply_flag(c, "--decode-concurrency", "3");
  apply_flag(c, "--no-progress", "");
  EXPECT_EQ(*c.batch_size, 64);
  EXPECT_TRUE(c.shuffle);
  EXPECT_EQ(*c.decode_concurrency, 3);
  EXPECT_FALSE(c.progress);
}

// The command line's own keys are checked by the job's key table but are not the job's:
// a RunConfig (the Python Loader's) hands them to its FrontEndSetting, a RunCommand keeps
// them in its RunOutput.
TEST(Config, OutputKeysGoToTheFrontEndNotToTheJob) {
  RunConfig job;
  std::vector<std::string> given;
  auto note = [&](std::string_view key, const SettingValue&) { given.emplace_back(key); };
  apply_toml(job, "json = true\nbatch_size = 4\nids_out = \"ids.txt\"\n", "run.toml", note);
  apply_setting(job, "progress", "", "--no-progress", true, note);
  // A TOML table's keys come in name order.
  EXPECT_EQ(given, (std::vector<std::string>{"ids_out", "json", "progress"}));
  EXPECT_EQ(*job.batch_size, 4);
  EXPECT_EQ(error_of([&] { apply_toml(job, "stop_after_batches = -2\n", "run.toml", note); }),
            "run.toml:1: stop_after_batches: expected a non-negative integer, got -2");
  RunCommand run;
  apply_toml(run, "json = true\nstop_after_batches = 3\n", "run.toml");
  EXPECT_TRUE(run.json);
  EXPECT_EQ(run.stop_after_batches, 3);
}

// The statistics' keys of issue 24 that shape a rank's behaviour for the analyzer.
TEST(Config, HangAfterAndPauseAfterBatchesAreCheckedFrontEndKeys) {
  RunCommand c;
  EXPECT_EQ(c.hang_after, 60);
  EXPECT_EQ(c.pause_after_batches, -1);
  apply_flag(c, "--hang-after", "2.5");
  apply_flag(c, "--pause-after-batches", "30");
  EXPECT_EQ(c.hang_after, 2.5);
  EXPECT_EQ(c.pause_after_batches, 30);
  EXPECT_NE(error_of([&] { apply_flag(c, "--hang-after", "0"); }).find("hang_after"),
            std::string::npos);
  EXPECT_NE(
      error_of([&] { apply_flag(c, "--pause-after-batches", "-1"); }).find("pause_after_batches"),
      std::string::npos);
  RunCommand t;
  apply_toml(t, "hang_after = 10\npause_after_batches = 0\n", "run.toml");
  EXPECT_EQ(t.hang_after, 10);
  EXPECT_EQ(t.pause_after_batches, 0);
}

TEST(Config, UnknownKeyNamesKeyAndLine) {
  RunCommand c;
  EXPECT_EQ(error_of([&] {
              apply_toml(c, "batch_size = 4\n\n[stages.decode]\nconcurency = 2\n", "run.toml");
            }),
            "run.toml:4: unknown key 'stages.decode.concurency'");
  EXPECT_EQ(error_of([&] { apply_toml(c, "[stages.resize]\nconcurrency = 2\n", "run.toml"); }),
            "run.toml:1: unknown key 'stages.resize'");
  EXPECT_EQ(error_of([&] { apply_toml(c, "stages = 3\n", "run.toml"); }),
            "run.toml:1: stages: expected a table, got 3");
}

TEST(Config, BadValueNamesKeyLineAndExpectation) {
  RunCommand c;
  EXPECT_EQ(error_of([&] { apply_toml(c, "\nbatch_size = -3\n", "run.toml"); }),
            "run.toml:2: batch_size: expected a positive integer up to 1048576, got -3");
  EXPECT_EQ(error_of([&] { apply_toml(c, "kind = \"audio\"\n", "run.toml"); }),
            "run.toml:1: kind: expected one of image, video, got \"audio\"");
  EXPECT_EQ(error_of([&] { apply_toml(c, "shuffle = 1\n", "run.toml"); }),
            "run.toml:1: shuffle: expected true or false, got 1");
  EXPECT_EQ(error_of([&] { apply_toml(c, "max_failures = \"lots\"\n", "run.toml"); }),
            "run.toml:1: max_failures: expected a count N or a rate \"N%\" (0-100), got \"lots\"");
  EXPECT_EQ(error_of([&] { apply_toml(c, "threads = 2.5\n", "run.toml"); }),
            "run.toml:1: threads: expected a positive integer up to 1024, got 2.5 (a float)");
  EXPECT_EQ(
      error_of([&] { apply_toml(c, "batch_size = 32.0\n", "run.toml"); }),
      "run.toml:1: batch_size: expected a positive integer up to 1048576, got 32.0 (a float)");
}

TEST(Config, ConcurrenciesAndBatchSizeHaveDocumentedMaxima) {
  RunCommand c;
  for (const char* flag : {"--threads", "--read-concurrency", "--decode-concurrency"}) {
    EXPECT_NE(error_of([&] { apply_flag(c, flag, "2147483647"); }).find("up to 1024"),
              std::string::npos)
        << flag;
    apply_flag(c, flag, "1024");
  }
  EXPECT_NE(error_of([&] { apply_flag(c, "--batch-size", "100000000"); }).find("up to 1048576"),
            std::string::npos);
  apply_flag(c, "--batch-size", "200000");
  EXPECT_EQ(c.batch_size, 200000);
}

TEST(Config, NegatableSwitchesOnly) {
  RunCommand c;
  apply_flag(c, "--no-shuffle", "");
  EXPECT_FALSE(c.shuffle);
  EXPECT_NE(error_of([&] { apply_flag(c, "--no-json", ""); }).find("unknown option"),
            std::string::npos);
}

TEST(Config, TomlSyntaxErrorNamesLine) {
  RunCommand c;
  const auto e = error_of([&] { apply_toml(c, "batch_size = 4\nseed = = 2\n", "run.toml"); });
  EXPECT_EQ(e.rfind("run.toml:2: ", 0), 0u) << e;
}

TEST(Config, BadFlagValueNamesFlag) {
  RunCommand c;
  EXPECT_EQ(error_of([&] { apply_flag(c, "--batch-size", "zero"); }),
            "--batch-size: batch_size: expected a positive integer up to 1048576, got 'zero'");
  EXPECT_EQ(error_of([&] { apply_flag(c, "--order", "random"); }),
            "--order: order: expected one of input, completion, got 'random'");
  EXPECT_EQ(
      error_of([&] { apply_flag(c, "--max-failures", "120%"); }),
      "--max-failures: max_failures: expected a count N or a rate \"N%\" (0-100), got '120%'");
}

TEST(Config, ErrorsCarryTheKeyTheyAreAbout) {
  auto toml = [](const char* text) {
    return [text] {
      RunCommand c;
      apply_toml(c, text, "run.toml");
    };
  };
  auto resolved = [](std::function<void(RunCommand&)> set,
                     std::map<std::string, std::string> vars) {
    return [set, vars] {
      RunCommand c;
      set(c);
      resolve(c, env(vars));
    };
  };
  EXPECT_EQ(key_of(toml("batch_size = -3\n")), "batch_size");
  EXPECT_EQ(key_of(toml("[stages.decode]\nconcurency = 2\n")), "stages.decode.concurency");
  EXPECT_EQ(key_of(toml("stages = 3\n")), "stages");
  EXPECT_EQ(key_of(toml("[remote]\nworkers = \"a:1,,b:2\"\n")), "remote.workers");
  EXPECT_EQ(key_of(toml("max_failures = \"lots\"\n")), "max_failures");
  EXPECT_EQ(key_of([] {
              RunCommand c;
              apply_flag(c, "--batch-size", "zero");
            }),
            "batch_size");
  EXPECT_EQ(key_of(resolved([](RunCommand&) {}, {{"RANK", "x"}, {"WORLD_SIZE", "2"}})), "rank");
  EXPECT_EQ(key_of(resolved([](RunCommand&) {}, {{"RANK", "0"}, {"WORLD_SIZE", "0"}})),
            "world_size");
  EXPECT_EQ(
      key_of(resolved([](RunCommand& c) { apply_flag(c, "--rank", "3"); }, {{"WORLD_SIZE", "2"}})),
      "rank");
  EXPECT_EQ(key_of(resolved(
                [](RunCommand& c) {
                  apply_flag(c, "--data", "d");
                  apply_flag(c, "--list", "l");
                },
                {})),
            "list");
  EXPECT_EQ(key_of(resolved([](RunCommand& c) { apply_flag(c, "--resize", "100"); }, {})),
            "resize");
  EXPECT_EQ(key_of(resolved([](RunCommand& c) { apply_flag(c, "--workers", "w:7000"); }, {})),
            "remote.token_file");
  // No key: a syntax error, an unknown flag, a launch variable that is no key.
  EXPECT_EQ(key_of(toml("seed = = 2\n")), "");
  EXPECT_EQ(key_of([] {
              RunCommand c;
              apply_flag(c, "--batchsize", "3");
            }),
            "");
  EXPECT_EQ(key_of(resolved([](RunCommand&) {}, {{"MASTER_ADDR", "m"}, {"MASTER_PORT", "0"}})), "");
}

TEST(Config, SeedTakesAny64BitValueCountsStayInt) {
  RunCommand c;
  apply_flag(c, "--seed", "9000000000000000000");
  EXPECT_EQ(c.seed, 9000000000000000000u);
  EXPECT_EQ(
      error_of([&] { apply_flag(c, "--batch-size", "9000000000"); }),
      "--batch-size: batch_size: expected a positive integer up to 1048576, got '9000000000'");
}

TEST(Config, FailureBudgetCountAndRate) {
  EXPECT_TRUE(parse_failure_budget("unlimited", "x").is_unlimited());
  auto count = parse_failure_budget("3", "x");
  EXPECT_FALSE(count.exceeded(3, 10));
  EXPECT_TRUE(count.exceeded(4, 10));
  auto rate = parse_failure_budget("10%", "x");
  EXPECT_FALSE(rate.exceeded(10, 100));
  EXPECT_TRUE(rate.exceeded(11, 100));
  RunCommand c;
  apply_toml(c, "max_failures = 2\n", "run.toml");
  resolve(c, env({}));
  EXPECT_TRUE(c.failure_budget.exceeded(3, 1000));
}

TEST(Config, RankAndWorldSizeFromEnvironment) {
  RunCommand a;
  resolve(a,
          env({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "8"}}));
  EXPECT_EQ(*a.rank, 1u);
  EXPECT_EQ(*a.world_size, 4u);
  RunCommand b;
  resolve(b, env({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "8"}}));
  EXPECT_EQ(*b.rank, 3u);
  EXPECT_EQ(*b.world_size, 8u);
  RunCommand c;
  apply_flag(c, "--rank", "0");
  resolve(c, env({{"RANK", "5"}, {"WORLD_SIZE", "8"}}));
  EXPECT_EQ(*c.rank, 0u);
  EXPECT_EQ(*c.world_size, 8u);
}

TEST(Config, RankNotBelowWorldSizeIsAnError) {
  RunCommand a;
  apply_flag(a, "--rank", "2");
  apply_flag(a, "--world-size", "2");
  EXPECT_EQ(error_of([&] { resolve(a, env({})); }),
            "rank 2 (from --rank) must be less than the world size 2 (from --world-size)");
  RunCommand b;
  EXPECT_EQ(error_of([&] {
              resolve(b, env({{"RANK", "3"}}));
            }),
            "rank 3 (from RANK) must be less than the world size 1 (from default)");
  RunCommand c;
  EXPECT_EQ(error_of([&] {
              resolve(c, env({{"WORLD_SIZE", "two"}}));
            }),
            "WORLD_SIZE=two: expected a positive integer");
}

TEST(Config, DataAndListTogetherIsAnError) {
  RunCommand c;
  apply_flag(c, "--data", "/a");
  apply_flag(c, "--list", "/b");
  EXPECT_EQ(error_of([&] { resolve(c, env({})); }), "data and list: give one of them, not both");
}

TEST(Config, EveryFlagIsAccepted) {
  for (const auto& f : run_flags()) {
    RunCommand c;
    const std::string value = f.flag == "--kind"              ? "video"
                              : f.flag == "--order"           ? "input"
                              : f.flag == "--layout"          ? "nchw"
                              : f.flag == "--device"          ? "cpu"
                              : f.flag == "--normalize"       ? "imagenet"
                              : f.flag == "--normalize-dtype" ? "float16"
                              : f.flag == "--workers"         ? "h:1"
                              : f.flag == "--directory"       ? "auto"
                              : f.flag == "--on-no-workers"   ? "fail"
                              : f.flag == "--decode"          ? "hybrid"
                              : f.flag == "--transform"       ? "train"
                              : f.flag == "--interpolation"   ? "bicubic"
                              : f.flag == "--tail"            ? "drop"
                              : f.flag == "--labels"          ? "folder"
                              : f.flag == "--manifest-format" ? "tsv"
                              : f.flag == "--scale"           ? "0.5,1"
                              : f.flag == "--ratio"           ? "0.5,2"
                              : f.flag == "--normalize-mean"  ? "0.5,0.5,0.5"
                              : f.flag == "--normalize-std"   ? "0.2,0.2,0.2"
                              : f.takes_value                 ? "1"
                                                              : "";
    EXPECT_NO_THROW(apply_flag(c, f.flag, value)) << f.flag;
    if (f.negatable) {
      EXPECT_NO_THROW(apply_flag(c, "--no-" + std::string(f.flag.substr(2)), "")) << f.flag;
    }
  }
}

// HYBRID and REBALANCING (launch/loader/job.h): [remote] decode and rebalance, or
// their flags; a mode that does not exist is named with the choices.
TEST(Config, HybridDecodeAndRebalanceFromFlagsAndToml) {
  RunCommand c;
  EXPECT_EQ(c.decode, DecodeMode::remote);
  EXPECT_FALSE(c.rebalance);
  apply_toml(c, R"(
[remote]
decode = "hybrid"
rebalance = true
)",
             "run.toml");
  EXPECT_EQ(c.decode, DecodeMode::hybrid);
  EXPECT_TRUE(c.rebalance);
  apply_flag(c, "--decode", "remote");
  apply_flag(c, "--no-rebalance", "");
  EXPECT_EQ(c.decode, DecodeMode::remote);
  EXPECT_FALSE(c.rebalance);
  try {
    apply_flag(c, "--decode", "local");
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("expected one of remote, hybrid, got 'local'"),
              std::string::npos)
        << e.what();
  }
}

TEST(Config, TransformKeysFromFlagsAndToml) {
  RunCommand c;
  apply_toml(c, R"(
transform = "train"
size = 192
scale = [0.25, 1]
ratio = "0.5,2"
flip_probability = 0.25
exif_orientation = true
normalize = "imagenet"
normalize_mean = [0.5, 0.5, 0.5]
)",
             "run.toml");
  apply_flag(c, "--normalize-std", "0.25,0.5,1");
  resolve(c, env({}));
  EXPECT_EQ(c.transform.kind, media::TransformKind::train);
  EXPECT_EQ(c.transform.size, 192);
  EXPECT_EQ(c.transform.resize, 219);  // 192 * 256 / 224
  EXPECT_EQ(c.transform.scale_min, 0.25);
  EXPECT_EQ(c.transform.scale_max, 1.0);
  EXPECT_EQ(c.transform.ratio_min, 0.5);
  EXPECT_EQ(c.transform.ratio_max, 2.0);
  EXPECT_EQ(c.transform.flip_probability, 0.25);
  EXPECT_TRUE(c.transform.exif_orientation);
  EXPECT_EQ(c.transform.interpolation, media::Interpolation::bilinear);  // the default
  EXPECT_EQ(c.normalize, Normalize::imagenet);
  EXPECT_EQ(c.normalize_dtype, media::DType::float32);
  EXPECT_EQ(c.normalize_mean, (std::array<float, 3>{0.5f, 0.5f, 0.5f}));
  EXPECT_EQ(c.normalize_std, (std::array<float, 3>{0.25f, 0.5f, 1.0f}));
}

TEST(Config, BadTransformValuesNameTheKey) {
  RunCommand c;
  EXPECT_EQ(error_of([&] { apply_flag(c, "--transform", "random"); }),
            "--transform: transform: expected one of eval, train, none, got 'random'");
  EXPECT_EQ(error_of([&] { apply_flag(c, "--scale", "0.9,0.5"); }),
            "--scale: scale: expected MIN,MAX with 0 < MIN <= MAX <= 1, got '0.9,0.5'");
  EXPECT_EQ(error_of([&] { apply_flag(c, "--scale", "0.5,1.5"); }),
            "--scale: scale: expected MIN,MAX with 0 < MIN <= MAX <= 1, got '0.5,1.5'");
  EXPECT_EQ(error_of([&] { apply_flag(c, "--ratio", "1"); }),
            "--ratio: ratio: expected MIN,MAX with 0 < MIN <= MAX, got '1'");
  EXPECT_EQ(error_of([&] { apply_toml(c, "ratio = [0, 2]\n", "run.toml"); }),
            "run.toml:1: ratio: expected MIN,MAX with 0 < MIN <= MAX, got an array");
  EXPECT_EQ(error_of([&] { apply_toml(c, "scale = [0.5, \"x\"]\n", "run.toml"); }),
            "run.toml:1: scale: expected MIN,MAX with 0 < MIN <= MAX <= 1, got an array");
  EXPECT_EQ(error_of([&] { apply_flag(c, "--flip-probability", "1.5"); }),
            "--flip-probability: flip_probability: expected a number from 0 to 1, got '1.5'");
  EXPECT_EQ(error_of([&] { apply_flag(c, "--normalize-std", "0.2,0,0.2"); }),
            "--normalize-std: normalize_std: expected three positive numbers R,G,B, got "
            "'0.2,0,0.2'");
  EXPECT_EQ(error_of([&] { apply_flag(c, "--size", "5000"); }),
            "--size: size: expected a positive integer up to 4096, got '5000'");
  RunCommand small;
  apply_flag(small, "--resize", "200");
  EXPECT_EQ(error_of([&] { resolve(small, env({})); }),
            "resize 200: eval's shorter side must be at least size 224 and at most 65536");
  EXPECT_EQ(key_of([&] { resolve(small, env({})); }), "resize");
  RunCommand video;
  apply_flag(video, "--kind", "video");
  apply_flag(video, "--transform", "none");
  EXPECT_EQ(error_of([&] { resolve(video, env({})); }),
            "transform none: clips (kind video) take eval (evenly spaced frames, center crop) or "
            "train (frames at clip_stride from a random first frame, a random crop and flip)");
  RunCommand clips;
  apply_flag(clips, "--kind", "video");
  apply_flag(clips, "--transform", "train");
  apply_flag(clips, "--clip-stride", "2");
  resolve(clips, env({}));
  EXPECT_EQ(clips.clip_stride, 2);
  EXPECT_EQ(decode_spec(clips, 0).clip_stride, 2);
  EXPECT_EQ(error_of([&] { apply_flag(clips, "--clip-stride", "0"); }),
            "--clip-stride: clip_stride: expected a positive integer up to 1024, got '0'");
}

TEST(Config, InterpolationIsAKeyOfTheSpec) {
  RunCommand file;
  apply_toml(file, "interpolation = \"bicubic\"\n", "run.toml");
  RunCommand flags;
  apply_flag(flags, "--interpolation", "bicubic");
  for (RunCommand* c : {&file, &flags}) {
    resolve(*c, env({}));
    EXPECT_EQ(c->transform.interpolation, media::Interpolation::bicubic);
    EXPECT_EQ(decode_spec(*c, 3).transform.interpolation, media::Interpolation::bicubic);
    EXPECT_EQ(decode_spec(*c, 3).transform.epoch, 3u);
  }
  RunCommand c;
  EXPECT_EQ(error_of([&] { apply_flag(c, "--interpolation", "lanczos"); }),
            "--interpolation: interpolation: expected one of bilinear, bicubic, got 'lanczos'");
  // Clips are resized by swscale's bilinear: bicubic is refused, naming the key.
  RunCommand clips;
  apply_flag(clips, "--kind", "video");
  apply_flag(clips, "--interpolation", "bicubic");
  EXPECT_EQ(key_of([&] { resolve(clips, env({})); }), "interpolation");
  EXPECT_NE(error_of([&] { resolve(clips, env({})); }).find("bilinear"), std::string::npos);
}

// A fresh folder under the system's temp folder, removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "config_test.XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  // Writes `text` to `name` with permission bits `mode`; returns its path.
  std::string file(const std::string& name, const std::string& text, mode_t mode = 0600) const {
    const auto p = path_ / name;
    std::ofstream(p) << text;
    ::chmod(p.c_str(), mode);
    return p.string();
  }
  std::string path(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

TEST(Config, RemoteTomlTableAndFlagsGiveTheSameConfig) {
  RunCommand file;
  apply_toml(file, R"(
[remote]
workers = ["10.0.0.1:7000", "[fd00::2]:7001"]
directory = "dir.example:7100"
on_no_workers = "fail"
token_file = "/etc/brigade/token"
tls_cert = "/etc/tls/cert.pem"
tls_key = "/etc/tls/key.pem"
tls_ca = "/etc/tls/ca.pem"
task_timeout = 2.5
max_attempts = 5
inflight = 12
)",
             "run.toml");
  RunCommand flags;
  for (const auto& [flag, value] :
       std::map<std::string, std::string>{{"--workers", "10.0.0.1:7000,[fd00::2]:7001"},
                                          {"--directory", "dir.example:7100"},
                                          {"--on-no-workers", "fail"},
                                          {"--token-file", "/etc/brigade/token"},
                                          {"--tls-cert", "/etc/tls/cert.pem"},
                                          {"--tls-key", "/etc/tls/key.pem"},
                                          {"--tls-ca", "/etc/tls/ca.pem"},
                                          {"--task-timeout", "2.5"},
                                          {"--max-attempts", "5"},
                                          {"--remote-inflight", "12"}}) {
    apply_flag(flags, flag, value);
  }
  for (const RunCommand* c : {&file, &flags}) {
    ASSERT_EQ(c->workers.size(), 2u);
    EXPECT_EQ(c->workers[0], (transport::Endpoint{"10.0.0.1", 7000}));
    EXPECT_EQ(c->workers[1], (transport::Endpoint{"fd00::2", 7001}));
    EXPECT_EQ(c->directory, "dir.example:7100");
    EXPECT_EQ(c->on_no_workers, OnNoWorkers::fail);
    EXPECT_EQ(c->token_file, "/etc/brigade/token");
    EXPECT_EQ(c->tls_cert, "/etc/tls/cert.pem");
    EXPECT_EQ(c->tls_key, "/etc/tls/key.pem");
    EXPECT_EQ(c->tls_ca, "/etc/tls/ca.pem");
    EXPECT_EQ(c->task_timeout, 2.5);
    EXPECT_EQ(c->max_attempts, 5);
    EXPECT_EQ(c->remote_inflight, 12);
    EXPECT_TRUE(c->remote());
  }
}

TEST(Config, RemoteDefaults) {
  RunCommand c;
  resolve(c, env({}));
  EXPECT_FALSE(c.remote());
  EXPECT_TRUE(c.workers.empty());
  EXPECT_EQ(c.directory, "");
  EXPECT_EQ(c.on_no_workers, OnNoWorkers::local);
  EXPECT_EQ(c.task_timeout, 30);
  EXPECT_EQ(c.max_attempts, 2);
  EXPECT_EQ(c.remote_inflight, 0);
  EXPECT_EQ(c.token, "");
  EXPECT_EQ(c.launcher, "none");
  EXPECT_EQ(c.master_addr, "");
  EXPECT_EQ(c.master_port, 0);
  EXPECT_FALSE(c.local_rank);
  EXPECT_FALSE(c.local_world_size);
}

TEST(Config, WorkersTakeOneCommaSeparatedStringInToml) {
  RunCommand c;
  apply_toml(c, "[remote]\nworkers = \"a:1, b:2\"\n", "run.toml");
  EXPECT_EQ(c.workers, (std::vector<transport::Endpoint>{{"a", 1}, {"b", 2}}));
  apply_flag(c, "--workers", "c:3");
  EXPECT_EQ(c.workers, (std::vector<transport::Endpoint>{{"c", 3}}));
}

TEST(Config, EndpointErrorsNameTheKeyAndLine) {
  RunCommand c;
  EXPECT_EQ(
      error_of([&] { apply_toml(c, "\n[remote]\nworkers = [\"a:1\", \"b\"]\n", "run.toml"); }),
      "run.toml:3: remote.workers: expected HOST:PORT (no port), got 'b'");
  EXPECT_EQ(error_of([&] { apply_toml(c, "[remote]\nworkers = \"a:1,,b:2\"\n", "run.toml"); }),
            "run.toml:2: remote.workers: expected HOST:PORT (no port), got ''");
  EXPECT_EQ(error_of([&] { apply_toml(c, "[remote]\ndirectory = \"d:0\"\n", "run.toml"); }),
            "run.toml:2: remote.directory: expected HOST:PORT (port 0 is only for listening), "
            "got 'd:0'");
  EXPECT_EQ(error_of([&] { apply_flag(c, "--workers", "a:1,b:99999"); }),
            "--workers: remote.workers: expected HOST:PORT (the port is a number 0-65535), got "
            "'b:99999'");
  EXPECT_EQ(error_of([&] { apply_flag(c, "--directory", "::1:7000"); }),
            "--directory: remote.directory: expected HOST:PORT (an IPv6 host goes in brackets), "
            "got '::1:7000'");
  EXPECT_EQ(error_of([&] { apply_toml(c, "[remote]\nworkers = [1, 2]\n", "run.toml"); }),
            "run.toml:2: remote.workers: expected HOST:PORT addresses (an array of strings, or "
            "one comma-separated string), got an array");
  EXPECT_EQ(error_of([&] { apply_toml(c, "[remote]\nworkers = []\n", "run.toml"); }),
            "run.toml:2: remote.workers: expected HOST:PORT addresses (an array of strings, or "
            "one comma-separated string), got an empty array");
  EXPECT_EQ(error_of([&] { apply_toml(c, "[remote]\ndirectory = 7\n", "run.toml"); }),
            "run.toml:2: remote.directory: expected HOST:PORT or auto, got 7");
  EXPECT_TRUE(c.workers.empty());
}

TEST(Config, RemoteIsATableAndTheTokenIsNoKey) {
  RunCommand c;
  EXPECT_EQ(error_of([&] { apply_toml(c, "remote = 3\n", "run.toml"); }),
            "run.toml:1: remote: expected a table, got 3");
  EXPECT_EQ(error_of([&] { apply_toml(c, "[remote]\ntoken = \"s3cret\"\n", "run.toml"); }),
            "run.toml:2: unknown key 'remote.token'");
  EXPECT_EQ(error_of([&] { apply_flag(c, "--token", "s3cret"); }), "--token: unknown option");
}

TEST(Config, RemoteNumbersHaveDocumentedBounds) {
  RunCommand c;
  apply_toml(c, "[remote]\ntask_timeout = 10\n", "run.toml");
  EXPECT_EQ(c.task_timeout, 10.0);
  apply_flag(c, "--task-timeout", "0.25");
  EXPECT_EQ(c.task_timeout, 0.25);
  apply_flag(c, "--task-timeout", "3600");
  for (const char* bad : {"0", "-1", "3600.5", "abc", "nan", "inf", ""}) {
    EXPECT_EQ(error_of([&] { apply_flag(c, "--task-timeout", bad); }),
              std::string("--task-timeout: remote.task_timeout: expected a positive number up to "
                          "3600, got '") +
                  bad + "'");
  }
  EXPECT_EQ(error_of([&] { apply_toml(c, "[remote]\ntask_timeout = \"5\"\n", "run.toml"); }),
            "run.toml:2: remote.task_timeout: expected a positive number up to 3600, got \"5\"");
  EXPECT_EQ(c.task_timeout, 3600.0);
  EXPECT_EQ(error_of([&] { apply_flag(c, "--max-attempts", "0"); }),
            "--max-attempts: remote.max_attempts: expected a positive integer up to 100, got '0'");
  EXPECT_EQ(
      error_of([&] { apply_flag(c, "--max-attempts", "101"); }),
      "--max-attempts: remote.max_attempts: expected a positive integer up to 100, got '101'");
  apply_flag(c, "--max-attempts", "100");
  EXPECT_EQ(c.max_attempts, 100);
  EXPECT_EQ(error_of([&] { apply_toml(c, "[remote]\ninflight = 1025\n", "run.toml"); }),
            "run.toml:2: remote.inflight: expected a non-negative integer up to 1024, got 1025");
  apply_flag(c, "--remote-inflight", "1024");
  apply_flag(c, "--remote-inflight", "0");
  EXPECT_EQ(c.remote_inflight, 0);
}

TEST(Config, OnNoWorkersIsLocalOrFail) {
  RunCommand c;
  EXPECT_EQ(error_of([&] { apply_flag(c, "--on-no-workers", "retry"); }),
            "--on-no-workers: remote.on_no_workers: expected one of local, fail, got 'retry'");
}

TEST(Config, RemoteRunNeedsAToken) {
  RunCommand a;
  apply_flag(a, "--workers", "w:7000");
  EXPECT_EQ(error_of([&] { resolve(a, env({})); }),
            "a remote run needs a job token: --token-file FILE or BRIGADE_TOKEN");
  RunCommand b;
  apply_flag(b, "--directory", "d:7100");
  EXPECT_EQ(error_of([&] {
              resolve(b, env({{"BRIGADE_TOKEN", ""}}));
            }),
            "a remote run needs a job token: --token-file FILE or BRIGADE_TOKEN");
  RunCommand c;
  apply_flag(c, "--workers", "w:7000");
  resolve(c, env({{"BRIGADE_TOKEN", "s3cret"}}));
  EXPECT_EQ(c.token, "s3cret");
}

TEST(Config, TokenFileIsReadWholeStrippedAndWinsOverTheEnvironment) {
  TempDir dir;
  RunCommand c;
  apply_flag(c, "--workers", "w:7000");
  apply_flag(c, "--token-file", dir.file("token", "  two words\tand more \n\r\n \t"));
  resolve(c, env({{"BRIGADE_TOKEN", "from-env"}}));
  EXPECT_EQ(c.token, "  two words\tand more");
}

TEST(Config, TokenFileRelativeToTheTomlFolder) {
  TempDir dir;
  dir.file("token", "abc\n", 0400);
  RunCommand c;
  apply_toml(c, "[remote]\nworkers = [\"w:1\"]\ntoken_file = \"token\"\n", dir.path("run.toml"));
  EXPECT_EQ(c.token_file, dir.path("token"));
  resolve(c, env({}));
  EXPECT_EQ(c.token, "abc");
}

TEST(Config, TokenFileReadableByGroupOrOthersIsRefused) {
  TempDir dir;
  for (auto [mode, text] : std::map<mode_t, std::string>{
           {0644, "0644"}, {0640, "0640"}, {0604, "0604"}, {0660, "0660"}}) {
    RunCommand c;
    apply_flag(c, "--workers", "w:7000");
    const auto path = dir.file("token-" + text, "s3cret\n", mode);
    apply_flag(c, "--token-file", path);
    EXPECT_EQ(error_of([&] {
                resolve(c, env({{"BRIGADE_TOKEN", "from-env"}}));
              }),
              "token_file " + path + ": permissions " + text + " are too open; chmod 600");
  }
}

TEST(Config, EmptyOrUnreadableTokenFileIsAnError) {
  TempDir dir;
  auto token_error = [&](const std::string& path) {
    RunCommand c;
    apply_flag(c, "--workers", "w:7000");
    apply_flag(c, "--token-file", path);
    return error_of([&] { resolve(c, env({{"BRIGADE_TOKEN", "from-env"}})); });
  };
  const auto empty = dir.file("empty", "");
  EXPECT_EQ(token_error(empty), "token_file " + empty + ": the file is empty");
  const auto blank = dir.file("blank", " \n\n");
  EXPECT_EQ(token_error(blank), "token_file " + blank + ": the file is empty");
  EXPECT_EQ(token_error(dir.path("absent")),
            "token_file " + dir.path("absent") + ": cannot read: No such file or directory");
  std::filesystem::create_directory(dir.path("folder"));
  ::chmod(dir.path("folder").c_str(), 0700);
  EXPECT_EQ(token_error(dir.path("folder")),
            "token_file " + dir.path("folder") + ": cannot read: Is a directory");
}

TEST(Config, TlsTakesAllThreeOrNone) {
  TempDir dir;
  const auto cert = dir.file("cert.pem", "CERT", 0644);
  const auto key = dir.file("key.pem", "KEY");
  const auto ca = dir.file("ca.pem", "CA", 0644);
  auto tls_error = [&](std::map<std::string, std::string> flags) {
    RunCommand c;
    apply_flag(c, "--workers", "w:7000");
    for (const auto& [flag, value] : flags) apply_flag(c, flag, value);
    return error_of([&] { resolve(c, env({{"BRIGADE_TOKEN", "t"}})); });
  };
  EXPECT_EQ(tls_error({{"--tls-cert", cert}, {"--tls-key", key}}),
            "TLS takes tls_cert, tls_key and tls_ca together, or none: tls_ca (--tls-ca) missing");
  EXPECT_EQ(tls_error({{"--tls-ca", ca}}),
            "TLS takes tls_cert, tls_key and tls_ca together, or none: tls_cert (--tls-cert), "
            "tls_key (--tls-key) missing");
  EXPECT_EQ(tls_error({{"--tls-cert", cert}, {"--tls-key", dir.path("nokey")}, {"--tls-ca", ca}}),
            "tls_key " + dir.path("nokey") + ": cannot read: No such file or directory");
  EXPECT_EQ(tls_error({{"--tls-cert", cert}, {"--tls-key", key}, {"--tls-ca", ca}}), "(no error)");
  EXPECT_EQ(tls_error({}), "(no error)");
}

TEST(Config, RemoteKeysWithoutARemoteRunAreUnused) {
  RunCommand c;
  apply_flag(c, "--tls-cert", "/nonexistent/cert.pem");
  apply_flag(c, "--token-file", "/nonexistent/token");
  apply_flag(c, "--max-attempts", "3");
  resolve(c, env({}));
  EXPECT_FALSE(c.remote());
  EXPECT_EQ(c.token, "");
  EXPECT_EQ(c.tls_cert, "/nonexistent/cert.pem");
}

TEST(Config, TorchrunEnvironment) {
  RunCommand c;
  resolve(c, env({{"RANK", "5"},
                  {"WORLD_SIZE", "8"},
                  {"LOCAL_RANK", "1"},
                  {"LOCAL_WORLD_SIZE", "4"},
                  {"MASTER_ADDR", "trainer-0"},
                  {"MASTER_PORT", "29400"}}));
  EXPECT_EQ(c.launcher, "torchrun");
  EXPECT_EQ(*c.rank, 5u);
  EXPECT_EQ(*c.world_size, 8u);
  EXPECT_EQ(c.rank_origin, "RANK");
  EXPECT_EQ(c.world_size_origin, "WORLD_SIZE");
  EXPECT_EQ(c.local_rank, 1u);
  EXPECT_EQ(c.local_world_size, 4u);
  EXPECT_EQ(c.master_addr, "trainer-0");
  EXPECT_EQ(c.master_port, 29400);
}

TEST(Config, SlurmEnvironment) {
  RunCommand c;
  resolve(c, env({{"SLURM_PROCID", "6"},
                  {"SLURM_NTASKS", "8"},
                  {"SLURM_LOCALID", "2"},
                  {"SLURM_NTASKS_PER_NODE", "4"},
                  {"SLURM_TASKS_PER_NODE", "3(x2),2"},
                  {"SLURM_LAUNCH_NODE_IPADDR", "10.1.0.7"},
                  {"SLURM_JOB_NODELIST", "node[001-002]"}}));
  EXPECT_EQ(c.launcher, "slurm");
  EXPECT_EQ(*c.rank, 6u);
  EXPECT_EQ(*c.world_size, 8u);
  EXPECT_EQ(c.rank_origin, "SLURM_PROCID");
  EXPECT_EQ(c.local_rank, 2u);
  EXPECT_EQ(c.local_world_size, 4u);  // SLURM_NTASKS_PER_NODE before SLURM_TASKS_PER_NODE
  EXPECT_EQ(c.master_addr, "10.1.0.7");
  EXPECT_EQ(c.master_port, kDefaultMasterPort);
  RunCommand with_port;
  resolve(with_port, env({{"SLURM_PROCID", "0"},
                          {"SLURM_JOB_NODELIST", "gpu[07-09]-ib,cpu1"},
                          {"MASTER_PORT", "12000"}}));
  EXPECT_EQ(with_port.master_addr, "gpu07-ib");
  EXPECT_EQ(with_port.master_port, 12000);
  RunCommand exported;  // an sbatch script's own MASTER_ADDR wins over the launch node
  resolve(exported, env({{"SLURM_PROCID", "0"},
                         {"SLURM_LAUNCH_NODE_IPADDR", "10.1.0.7"},
                         {"MASTER_ADDR", "head"}}));
  EXPECT_EQ(exported.master_addr, "head");
  EXPECT_EQ(exported.master_port, kDefaultMasterPort);
}

TEST(Config, SlurmTasksPerNodeForThisNode) {
  auto local_size = [](std::map<std::string, std::string> vars) {
    vars.emplace("SLURM_PROCID", "0");
    RunCommand c;
    resolve(c, env(vars));
    return c.local_world_size;
  };
  EXPECT_EQ(local_size({{"SLURM_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "0"}}), 2u);
  EXPECT_EQ(local_size({{"SLURM_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "2"}}), 2u);
  EXPECT_EQ(local_size({{"SLURM_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "3"}}), 1u);
  EXPECT_EQ(local_size({{"SLURM_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "4"}}), std::nullopt);
  EXPECT_EQ(local_size({{"SLURM_TASKS_PER_NODE", "2(x3),1"}}), std::nullopt);
  EXPECT_EQ(local_size({{"SLURM_TASKS_PER_NODE", "4(x2),4"}}), 4u);
  EXPECT_EQ(local_size({{"SLURM_TASKS_PER_NODE", "8"}}), 8u);
  for (const char* bad : {"2(x3", "2(3)", "x", "2,", "0", "2(x0)"}) {
    EXPECT_EQ(error_of([&] {
                local_size({{"SLURM_TASKS_PER_NODE", bad}});
              }),
              std::string("SLURM_TASKS_PER_NODE=") + bad + ": expected task counts like 2(x3),1");
  }
}

TEST(Config, TorchrunWinsOverSlurm) {
  RunCommand c;
  resolve(c, env({{"RANK", "3"},
                  {"WORLD_SIZE", "4"},
                  {"SLURM_PROCID", "1"},
                  {"SLURM_NTASKS", "2"},
                  {"SLURM_LOCALID", "1"},
                  {"SLURM_NTASKS_PER_NODE", "2"},
                  {"SLURM_LAUNCH_NODE_IPADDR", "10.1.0.7"}}));
  EXPECT_EQ(c.launcher, "torchrun");
  EXPECT_EQ(*c.rank, 3u);
  EXPECT_EQ(*c.world_size, 4u);
  EXPECT_FALSE(c.local_rank);  // SLURM_LOCALID counts torchrun launchers, not trainers
  EXPECT_FALSE(c.local_world_size);
  EXPECT_EQ(c.master_addr, "");  // torchrun's MASTER_ADDR, never Slurm's launch node
  EXPECT_EQ(c.master_port, 0);
}

TEST(Config, MixingTorchrunAndSlurmHalvesIsAnError) {
  auto mixed = [](std::map<std::string, std::string> vars) {
    RunCommand c;
    return error_of([&] { resolve(c, env(vars)); });
  };
  EXPECT_EQ(mixed({{"RANK", "1"}, {"SLURM_NTASKS", "4"}}),
            "RANK=1 (torchrun) without WORLD_SIZE; SLURM_NTASKS=4 is Slurm's: set WORLD_SIZE or "
            "--world-size");
  EXPECT_EQ(mixed({{"WORLD_SIZE", "4"}, {"SLURM_PROCID", "2"}}),
            "WORLD_SIZE=4 (torchrun) without RANK; SLURM_PROCID=2 is Slurm's: set RANK or --rank");
  EXPECT_EQ(mixed({{"RANK", "1"},
                   {"WORLD_SIZE", "4"},
                   {"LOCAL_RANK", "1"},
                   {"SLURM_TASKS_PER_NODE", "2(x2)"}}),
            "LOCAL_RANK=1 (torchrun) without LOCAL_WORLD_SIZE; SLURM_TASKS_PER_NODE=2(x2) is "
            "Slurm's: set LOCAL_WORLD_SIZE");
  EXPECT_EQ(
      mixed(
          {{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"}, {"SLURM_LOCALID", "0"}}),
      "LOCAL_WORLD_SIZE=2 (torchrun) without LOCAL_RANK; SLURM_LOCALID=0 is Slurm's: set "
      "LOCAL_RANK");
  // The flag gives the missing half: nothing is mixed.
  RunCommand c;
  apply_flag(c, "--world-size", "2");
  resolve(c, env({{"RANK", "1"}, {"SLURM_NTASKS", "4"}}));
  EXPECT_EQ(*c.rank, 1u);
  EXPECT_EQ(*c.world_size, 2u);
  EXPECT_EQ(c.world_size_origin, "--world-size");
}

TEST(Config, FlagsOverrideTheLaunchEnvironment) {
  RunCommand a;
  apply_flag(a, "--rank", "1");
  apply_flag(a, "--world-size", "2");
  resolve(a, env({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "0"}}));
  EXPECT_EQ(*a.rank, 1u);
  EXPECT_EQ(*a.world_size, 2u);
  EXPECT_EQ(a.rank_origin, "--rank");
  EXPECT_EQ(a.local_rank, 0u);
  RunCommand b;
  apply_flag(b, "--rank", "3");
  EXPECT_EQ(error_of([&] {
              resolve(b, env({{"WORLD_SIZE", "2"}, {"RANK", "0"}}));
            }),
            "rank 3 (from --rank) must be less than the world size 2 (from WORLD_SIZE)");
  RunCommand c;
  apply_toml(c, "world_size = 2\n", "run.toml");
  EXPECT_EQ(error_of([&] {
              resolve(c, env({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"}}));
            }),
            "rank 2 (from SLURM_PROCID) must be less than the world size 2 (from run.toml:1)");
}

TEST(Config, LocalRankNotBelowLocalWorldSizeIsAnError) {
  RunCommand a;
  EXPECT_EQ(error_of([&] {
              resolve(a, env({{"RANK", "2"},
                              {"WORLD_SIZE", "4"},
                              {"LOCAL_RANK", "2"},
                              {"LOCAL_WORLD_SIZE", "2"}}));
            }),
            "local rank 2 (from LOCAL_RANK) must be less than the local world size 2 (from "
            "LOCAL_WORLD_SIZE)");
  RunCommand b;
  EXPECT_EQ(error_of([&] {
              resolve(b, env({{"SLURM_PROCID", "3"},
                              {"SLURM_NTASKS", "4"},
                              {"SLURM_LOCALID", "3"},
                              {"SLURM_TASKS_PER_NODE", "2(x2)"}}));
            }),
            "local rank 3 (from SLURM_LOCALID) must be less than the local world size 2 (from "
            "SLURM_TASKS_PER_NODE)");
}

TEST(Config, MalformedLaunchVariablesAreErrors) {
  auto bad = [](std::map<std::string, std::string> vars) {
    RunCommand c;
    return error_of([&] { resolve(c, env(vars)); });
  };
  EXPECT_EQ(bad({{"RANK", "x"}, {"WORLD_SIZE", "2"}}), "RANK=x: expected a non-negative integer");
  EXPECT_EQ(bad({{"SLURM_PROCID", "-1"}}), "SLURM_PROCID=-1: expected a non-negative integer");
  EXPECT_EQ(bad({{"SLURM_NTASKS", "0"}}), "SLURM_NTASKS=0: expected a positive integer");
  EXPECT_EQ(bad({{"RANK", "0"}, {"LOCAL_RANK", "one"}}),
            "LOCAL_RANK=one: expected a non-negative integer");
  EXPECT_EQ(bad({{"RANK", "0"}, {"LOCAL_WORLD_SIZE", "0"}}),
            "LOCAL_WORLD_SIZE=0: expected a positive integer");
  EXPECT_EQ(bad({{"SLURM_PROCID", "0"}, {"SLURM_LOCALID", "1.5"}}),
            "SLURM_LOCALID=1.5: expected a non-negative integer");
  EXPECT_EQ(bad({{"SLURM_PROCID", "0"}, {"SLURM_TASKS_PER_NODE", "2"}, {"SLURM_NODEID", "a"}}),
            "SLURM_NODEID=a: expected a non-negative integer");
  EXPECT_EQ(bad({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}),
            "MASTER_PORT=70000: expected a port 1-65535");
  EXPECT_EQ(bad({{"SLURM_PROCID", "0"}, {"SLURM_JOB_NODELIST", "node[1-"}}),
            "SLURM_JOB_NODELIST: expected a Slurm host list like node[001-004,007],gpu12 (an "
            "unclosed '['), got 'node[1-'");
}

TEST(Config, DirectoryAutoIsNextToTheMasterPort) {
  RunCommand a;
  apply_flag(a, "--directory", "auto");
  resolve(a, env({{"RANK", "0"},
                  {"WORLD_SIZE", "2"},
                  {"MASTER_ADDR", "10.0.0.1"},
                  {"MASTER_PORT", "29400"},
                  {"BRIGADE_TOKEN", "t"}}));
  EXPECT_EQ(a.directory, "10.0.0.1:" + std::to_string(29400 + kDirectoryPortOffset));
  EXPECT_EQ(a.directory, "10.0.0.1:29401");
  EXPECT_TRUE(hosts_directory(a));
  RunCommand b;
  apply_toml(b, "[remote]\ndirectory = \"auto\"\n", "run.toml");
  resolve(b, env({{"SLURM_PROCID", "1"},
                  {"SLURM_NTASKS", "2"},
                  {"SLURM_LAUNCH_NODE_IPADDR", "fd00::7"},
                  {"BRIGADE_TOKEN", "t"}}));
  EXPECT_EQ(b.directory, "[fd00::7]:29501");
  EXPECT_FALSE(hosts_directory(b));  // rank 1
}

TEST(Config, DirectoryAutoWithoutAMasterIsAnError) {
  const std::string message =
      "directory auto: the launch environment names no master: looked for MASTER_ADDR "
      "(torchrun), and under Slurm SLURM_LAUNCH_NODE_IPADDR, then SLURM_JOB_NODELIST; give "
      "--directory HOST:PORT";
  for (const auto& vars : std::vector<std::map<std::string, std::string>>{
           {{"BRIGADE_TOKEN", "t"}},
           {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "29400"}, {"BRIGADE_TOKEN", "t"}},
           {{"SLURM_PROCID", "0"}, {"BRIGADE_TOKEN", "t"}}}) {
    RunCommand c;
    apply_flag(c, "--directory", "auto");
    EXPECT_EQ(error_of([&] { resolve(c, env(vars)); }), message);
  }
}

TEST(Config, DirectoryPortPastTheLastPortIsAnError) {
  RunCommand c;
  apply_flag(c, "--directory", "auto");
  EXPECT_EQ(
      error_of([&] {
        resolve(c, env({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "65535"}, {"BRIGADE_TOKEN", "t"}}));
      }),
      "directory auto: port 65536 (MASTER_PORT 65535 + 1) is past 65535");
}

TEST(Config, HostsDirectoryOnlyOnRankZeroWithADirectory) {
  auto hosts = [](std::map<std::string, std::string> flags) {
    RunCommand c;
    for (const auto& [flag, value] : flags) apply_flag(c, flag, value);
    resolve(c, env({{"BRIGADE_TOKEN", "t"}}));
    return hosts_directory(c);
  };
  EXPECT_TRUE(hosts({{"--directory", "h:7100"}}));
  EXPECT_TRUE(hosts({{"--directory", "h:7100"}, {"--workers", "w:1"}}));
  EXPECT_FALSE(hosts({{"--workers", "w:1"}}));
  EXPECT_FALSE(hosts({{"--directory", "h:7100"}, {"--rank", "1"}, {"--world-size", "2"}}));
  EXPECT_FALSE(hosts({}));
}

TEST(Config, FirstSlurmHost) {
  EXPECT_EQ(first_slurm_host("node[001-004,007],gpu12"), "node001");
  EXPECT_EQ(first_slurm_host("a,b"), "a");
  EXPECT_EQ(first_slurm_host("n[1-2]-ib"), "n1-ib");
  EXPECT_EQ(first_slurm_host("single"), "single");
  EXPECT_EQ(first_slurm_host("gpu12,node[001-004]"), "gpu12");
  EXPECT_EQ(first_slurm_host("rack[2,5]-n[08-09]"), "rack2-n08");
  EXPECT_EQ(first_slurm_host("n[7]"), "n7");
  for (const auto& [bad, why] : std::map<std::string, std::string>{
           {"", "an empty host"},
           {"a,,b", "an empty host"},
           {"a,", "an empty host"},
           {"node[1-", "an unclosed '['"},
           {"node[]", "an empty '[]'"},
           {"node1]", "a stray ']'"},
           {"node 1", "a stray ' '"},
           {"node[a-b]", "'a-b' in brackets is no number or range"},
           {"node[4-1]", "'4-1' in brackets is no number or range"},
           {"node[1,]", "'' in brackets is no number or range"},
           {"node[1-2],x[[1]]", "'[1' in brackets is no number or range"}}) {
    EXPECT_EQ(
        error_of([&] { first_slurm_host(bad); }),
        "expected a Slurm host list like node[001-004,007],gpu12 (" + why + "), got '" + bad + "'")
        << bad;
  }
}

}  // namespace
}  // namespace brigade::launch
