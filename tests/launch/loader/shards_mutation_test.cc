// The tar index (launch/loader/shards.h) against mutated shards and mutated index caches:
// a result or a ShardError, never a crash, never anything else — run under
// AddressSanitizer by scripts/test.sh. A mutated cache is never believed: the index read
// through it equals the shard's own.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "launch/loader/shards.h"
#include "tests/transport/wire/mutations.h"

namespace brigade::launch {
namespace {

namespace fs = std::filesystem;

class ShardMutations : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("brigade-shard-mutations-" + std::to_string(std::random_device{}()));
    const auto src = root_ / "src";
    const std::string long_dir(130, 'd');
    fs::create_directories(src / long_dir);
    std::vector<std::string> names;
    for (int i = 0; i < 6; ++i) {
      const std::string key = (i % 2 ? long_dir + "/" : std::string()) + "k" + std::to_string(i);
      std::ofstream(src / (key + ".jpg"), std::ios::binary)
          << std::string(300 + 97 * i, char('a' + i));
      std::ofstream(src / (key + ".cls")) << i;
      std::ofstream(src / (key + ".json")) << "{\"y\": " << i << ", \"m\": \"v" << i << "\"}";
      for (const auto* ext : {".jpg", ".cls", ".json"}) names.push_back(key + ext);
    }
    for (const std::string format : {"pax", "gnu"}) {
      std::string cmd = "tar --format=" + format + " -cf '" + (root_ / (format + ".tar")).string() +
                        "' -C '" + src.string() + "'";
      for (const auto& n : names) cmd += " '" + n + "'";
      ASSERT_EQ(std::system(cmd.c_str()), 0);
    }
  }
  void TearDown() override { fs::remove_all(root_); }

  static std::vector<char> read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  static void write(const fs::path& p, const std::vector<char>& bytes) {
    std::ofstream(p, std::ios::binary | std::ios::trunc)
        .write(bytes.data(), std::streamsize(bytes.size()));
  }
  fs::path root_;
};

TEST_F(ShardMutations, AMutatedShardGivesAnIndexOrAShardError) {
  for (const std::string format : {"pax", "gnu"}) {
    const auto valid = read(root_ / (format + ".tar"));
    const auto target = root_ / "m.tar";
    std::mt19937 random(format == "pax" ? 23 : 24);
    int rejected = 0;
    for (int round = 0; round < 600; ++round) {
      write(target, transport::test::mutated(valid, round, random));
      try {
        const auto d = open_shards(
            {target.string()},
            {.label_field = round % 3 == 0 ? "y" : "", .meta_fields = {"m"}, .use_cache = false});
        // What it returns lies inside the file.
        for (std::size_t i = 0; i < d.size(); ++i) {
          const auto l = d.location(i);
          EXPECT_LE(l.offset + l.size, fs::file_size(target));
        }
      } catch (const ShardError&) {
        ++rejected;
      }
    }
    EXPECT_GT(rejected, 0);
  }
}

TEST_F(ShardMutations, AMutatedCacheIsNeverBelieved) {
  const auto shard = (root_ / "pax.tar").string();
  const ShardOptions o{.label_field = "y", .cache_dir = (root_ / "cache").string()};
  const auto truth = open_shards({shard}, o);
  fs::path cache;
  for (const auto& e : fs::directory_iterator(root_ / "cache")) cache = e.path();
  const auto valid = read(cache);
  std::mt19937 random(25);
  for (int round = 0; round < 400; ++round) {
    write(cache, transport::test::mutated(valid, round, random));
    const auto d = open_shards({shard}, o);
    ASSERT_EQ(d.size(), truth.size());
    EXPECT_EQ(d.identity_hash(), truth.identity_hash());
    for (std::size_t i = 0; i < d.size(); ++i) ASSERT_EQ(d.location(i), truth.location(i));
  }
}

}  // namespace
}  // namespace brigade::launch
