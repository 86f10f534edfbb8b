#include "launch/config.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace brigade::launch {
namespace {

Getenv env(std::map<std::string, std::string> vars) {
  auto held = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [held](const char* name) -> const char* {
    auto it = held->find(name);
    return it == held->end() ? nullptr : it->second.c_str();
  };
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Config, DefaultsAfterResolve) {
  RunConfig c;
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
  RunConfig c;
  apply_flag(c, "--kind", "video");
  resolve(c, env({}));
  EXPECT_EQ(c.kind, MediaKind::video);
  EXPECT_EQ(*c.batch_size, 8);
}

TEST(Config, TomlKeysAndTables) {
  RunConfig c;
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
  EXPECT_EQ(c.max_failures, "5%");
  EXPECT_EQ(c.layout, Layout::nchw);
  EXPECT_EQ(c.read_concurrency, 4);
  EXPECT_EQ(*c.decode_concurrency, 2);
}

TEST(Config, RelativePathsInTomlResolveAgainstItsFolder) {
  RunConfig c;
  apply_toml(c, "data = \"images\"\nids_out = \"/tmp/ids.txt\"\n", "/etc/job/run.toml");
  EXPECT_EQ(c.data, "/etc/job/images");
  EXPECT_EQ(c.ids_out, "/tmp/ids.txt");
}

TEST(Config, FlagsOverrideTheFile) {
  RunConfig c;
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

TEST(Config, UnknownKeyNamesKeyAndLine) {
  RunConfig c;
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
  RunConfig c;
  EXPECT_EQ(error_of([&] { apply_toml(c, "\nbatch_size = -3\n", "run.toml"); }),
            "run.toml:2: batch_size: expected a positive integer up to 1048576, got -3");
  EXPECT_EQ(error_of([&] { apply_toml(c, "kind = \"audio\"\n", "run.toml"); }),
            "run.toml:1: kind: expected one of image, video, got \"audio\"");
  EXPECT_EQ(error_of([&] { apply_toml(c, "shuffle = 1\n", "run.toml"); }),
            "run.toml:1: shuffle: expected true or false, got 1");
  EXPECT_EQ(error_of([&] { apply_toml(c, "max_failures = \"lots\"\n", "run.toml"); }),
            "run.toml:1: max_failures: expected a count N or a rate \"N%\" (0-100), got \"lots\"");
  EXPECT_EQ(error_of([&] { apply_toml(c, "threads = 2.5\n", "run.toml"); }),
            "run.toml:1: threads: expected a positive integer up to 1024, got 2.5");
}

TEST(Config, ConcurrenciesAndBatchSizeHaveDocumentedMaxima) {
  RunConfig c;
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
  RunConfig c;
  apply_flag(c, "--no-shuffle", "");
  EXPECT_FALSE(c.shuffle);
  EXPECT_NE(error_of([&] { apply_flag(c, "--no-json", ""); }).find("unknown option"),
            std::string::npos);
}

TEST(Config, TomlSyntaxErrorNamesLine) {
  RunConfig c;
  const auto e = error_of([&] { apply_toml(c, "batch_size = 4\nseed = = 2\n", "run.toml"); });
  EXPECT_EQ(e.rfind("run.toml:2: ", 0), 0u) << e;
}

TEST(Config, BadFlagValueNamesFlag) {
  RunConfig c;
  EXPECT_EQ(error_of([&] { apply_flag(c, "--batch-size", "zero"); }),
            "--batch-size: batch_size: expected a positive integer up to 1048576, got 'zero'");
  EXPECT_EQ(error_of([&] { apply_flag(c, "--order", "random"); }),
            "--order: order: expected one of input, completion, got 'random'");
  EXPECT_EQ(
      error_of([&] { apply_flag(c, "--max-failures", "120%"); }),
      "--max-failures: max_failures: expected a count N or a rate \"N%\" (0-100), got '120%'");
}

TEST(Config, SeedTakesAny64BitValueCountsStayInt) {
  RunConfig c;
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
  RunConfig c;
  apply_toml(c, "max_failures = 2\n", "run.toml");
  resolve(c, env({}));
  EXPECT_TRUE(c.failure_budget.exceeded(3, 1000));
}

TEST(Config, RankAndWorldSizeFromEnvironment) {
  RunConfig a;
  resolve(a,
          env({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "8"}}));
  EXPECT_EQ(*a.rank, 1u);
  EXPECT_EQ(*a.world_size, 4u);
  RunConfig b;
  resolve(b, env({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "8"}}));
  EXPECT_EQ(*b.rank, 3u);
  EXPECT_EQ(*b.world_size, 8u);
  RunConfig c;
  apply_flag(c, "--rank", "0");
  resolve(c, env({{"RANK", "5"}, {"WORLD_SIZE", "8"}}));
  EXPECT_EQ(*c.rank, 0u);
  EXPECT_EQ(*c.world_size, 8u);
}

TEST(Config, RankNotBelowWorldSizeIsAnError) {
  RunConfig a;
  apply_flag(a, "--rank", "2");
  apply_flag(a, "--world-size", "2");
  EXPECT_EQ(error_of([&] { resolve(a, env({})); }),
            "rank 2 (from --rank) must be less than the world size 2 (from --world-size)");
  RunConfig b;
  EXPECT_EQ(error_of([&] {
              resolve(b, env({{"RANK", "3"}}));
            }),
            "rank 3 (from RANK) must be less than the world size 1 (from default)");
  RunConfig c;
  EXPECT_EQ(error_of([&] {
              resolve(c, env({{"WORLD_SIZE", "two"}}));
            }),
            "WORLD_SIZE=two: expected a positive integer");
}

TEST(Config, DataAndListTogetherIsAnError) {
  RunConfig c;
  apply_flag(c, "--data", "/a");
  apply_flag(c, "--list", "/b");
  EXPECT_EQ(error_of([&] { resolve(c, env({})); }), "data and list: give one of them, not both");
}

TEST(Config, EveryFlagIsAccepted) {
  for (const auto& f : run_flags()) {
    RunConfig c;
    const std::string value = f.flag == "--kind"              ? "video"
                              : f.flag == "--order"           ? "input"
                              : f.flag == "--layout"          ? "nchw"
                              : f.flag == "--device"          ? "cpu"
                              : f.flag == "--normalize"       ? "imagenet"
                              : f.flag == "--normalize-dtype" ? "float16"
                              : f.takes_value                 ? "1"
                                                              : "";
    EXPECT_NO_THROW(apply_flag(c, f.flag, value)) << f.flag;
    if (f.negatable) {
      EXPECT_NO_THROW(apply_flag(c, "--no-" + std::string(f.flag.substr(2)), "")) << f.flag;
    }
  }
}

}  // namespace
}  // namespace brigade::launch
