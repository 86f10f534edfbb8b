#include "transport/checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>
#include <set>

#include "actors/pipeline.h"
#include "tests/actors/random_commit.h"

namespace brigade::transport {
namespace {

namespace fs = std::filesystem;
using actors::CommitState;
using actors::DistributedRandomSampler;
using actors::DistributedSampler;
using actors::SamplerState;
using actors::TailPolicy;
using Ids = std::multiset<std::pair<std::uint64_t, bool>>;

// A fresh directory under the system's temp directory, removed at the end.
class TempDir {
 public:
  TempDir() {
    static std::mt19937_64 rng(std::random_device{}());
    path_ = fs::temp_directory_path() / ("brigade-ckpt-" + std::to_string(rng()));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::vector<std::byte> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

void write_bytes(const fs::path& p, std::span<const std::byte> bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

struct Params {
  std::uint64_t n = 0;
  std::uint64_t seed = 0;
  std::uint64_t epoch = 0;
  TailPolicy tail = TailPolicy::none;
};

DistributedSampler make(const Params& p, std::uint32_t rank, std::uint32_t world) {
  return DistributedRandomSampler(p.n, {.rank = rank,
                                        .world_size = world,
                                        .seed = p.seed,
                                        .epoch = p.epoch,
                                        .tail = p.tail,
                                        .identity_hash = 0xfeed});
}

using brigade::actors::testing::random_commit;

// What the engine's tracker would hold after committing `more` on top of `restored`.
CommitState merge(const CommitState& restored, const CommitState& more, std::uint64_t share) {
  CommitState out;
  bool gap = false;
  for (std::uint64_t p = 0; p < share; ++p) {
    const bool done = restored.committed(p) || more.committed(p);
    if (!done)
      gap = true;
    else if (!gap)
      out.watermark = p + 1;
    else
      out.above.push_back(p);
  }
  return out;
}

// Every rank restores `states`, "trains" to a random point, and saves generation
// `generation` into `dir`. Returns the samples left uncommitted.
Ids run_and_save(std::mt19937_64& rng, const Params& p, const std::vector<SamplerState>& states,
                 const fs::path& dir, std::uint64_t generation) {
  Ids left;
  for (const auto& st : states) {
    auto s = make(p, st.rank, st.world_size);
    s.restore(st);
    const CommitState commit = merge(st.committed, random_commit(rng, s.size()), s.size());
    while (auto d = s.next()) {
      if (!commit.committed(d->position)) left.emplace(d->value.id, d->value.is_padding);
    }
    write_checkpoint(dir, s.state(commit, generation), {.sync = false});  // 200 cases: skip fsync
  }
  return left;
}

SamplerState sample_state() {
  DistributedRandomSampler s(1000, {.rank = 1,
                                    .world_size = 3,
                                    .seed = 9,
                                    .epoch = 2,
                                    .tail = TailPolicy::pad,
                                    .identity_hash = 77});
  return s.state({.watermark = 10, .above = {12, 15}}, 4);
}

void write_set(const fs::path& dir, std::uint32_t world, std::uint64_t generation,
               std::uint64_t seed = 9) {
  for (std::uint32_t r = 0; r < world; ++r) {
    DistributedRandomSampler s(1000, {.rank = r, .world_size = world, .seed = seed});
    write_checkpoint(dir, s.state({.watermark = 5}, generation));
  }
}

// Expects `f` to throw a CheckpointError of `kind` whose message contains `text`.
template <class F>
void expect_error(F f, CheckpointErrorKind kind, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "no error; expected " << to_string(kind) << " mentioning " << text;
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, RoundTripsEveryField) {
  const SamplerState s = sample_state();
  EXPECT_EQ(decode_checkpoint(encode_checkpoint(s), "x"), s);
  SamplerState big = s;
  big.fingerprint.kind = actors::SamplerKind::weighted;
  big.fingerprint.weights_hash = 12345;
  big.owned = {{1, 3, 5}, {100, 7, 9}};
  big.committed = {.watermark = 0, .above = {}};
  EXPECT_EQ(decode_checkpoint(encode_checkpoint(big), "x"), big);
}

TEST(Checkpoint, WritesAtomicallyAndResumesExactlyAtTheSameWorldSize) {
  TempDir dir;
  write_set(dir.path(), 3, 7);
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path()))
    names.insert(e.path().filename().string());
  EXPECT_EQ(names,
            (std::set<std::string>{"rank-0-of-3.ckpt", "rank-1-of-3.ckpt", "rank-2-of-3.ckpt"}));
  for (std::uint32_t r = 0; r < 3; ++r) {
    const auto loaded = load_checkpoint(dir.path(), r, 3);
    DistributedRandomSampler s(1000, {.rank = r, .world_size = 3, .seed = 9});
    EXPECT_EQ(loaded.state, s.state({.watermark = 5}, 7));
    EXPECT_EQ(loaded.generation, 7u);
    EXPECT_EQ(loaded.saved_world_size, 3u);
    // Exact resume: the same sequence from local position 5 on.
    s.restore(loaded.state);
    DistributedRandomSampler full(1000, {.rank = r, .world_size = 3, .seed = 9});
    for (int k = 0; k < 5; ++k) full.next();
    while (auto d = s.next()) {
      auto e = full.next();
      ASSERT_TRUE(e);
      EXPECT_EQ(d->position, e->position);
      EXPECT_EQ(d->value, e->value);
    }
    EXPECT_FALSE(full.next());
  }
}

TEST(Checkpoint, ElasticChainsDeliverExactlyTheUncommittedSamples) {
  std::mt19937_64 rng(1234);
  TempDir root;
  for (int i = 0; i < 200; ++i) {
    Params p;
    p.n = rng() % 4 == 0 ? rng() % 6 : rng() % 200;
    p.seed = rng();
    p.epoch = rng() % 3;
    p.tail = static_cast<TailPolicy>(rng() % 3);
    std::vector<std::uint32_t> worlds;
    for (int k = 0; k < 3; ++k) worlds.push_back(1 + static_cast<std::uint32_t>(rng() % 6));
    SCOPED_TRACE("case " + std::to_string(i) + " n=" + std::to_string(p.n) + " worlds " +
                 std::to_string(worlds[0]) + "," + std::to_string(worlds[1]) + "," +
                 std::to_string(worlds[2]) + " tail " + to_string(p.tail));
    const fs::path dir = root.path() / std::to_string(i);
    std::vector<SamplerState> states;
    for (std::uint32_t r = 0; r < worlds[0]; ++r) states.push_back(make(p, r, worlds[0]).state({}));
    for (std::size_t step = 1; step < worlds.size(); ++step) {
      const Ids left = run_and_save(rng, p, states, dir, step);
      const std::uint32_t w = worlds[step];
      Ids delivered;
      std::uint64_t min_share = ~0ULL, max_share = 0;
      states.clear();
      for (std::uint32_t r = 0; r < w; ++r) {
        auto s = make(p, r, w);
        const auto loaded = load_checkpoint(dir, r, w, {.expected = s.fingerprint()});
        ASSERT_EQ(loaded.generation, step);
        s.restore(loaded.state);
        states.push_back(loaded.state);
        std::uint64_t count = 0;
        while (auto d = s.next()) {
          delivered.emplace(d->value.id, d->value.is_padding);
          ++count;
        }
        min_share = std::min(min_share, count);
        max_share = std::max(max_share, count);
      }
      ASSERT_EQ(delivered, left);
      // Re-partitioned shares are balanced; at the same W each rank keeps its own.
      if (w != worlds[step - 1]) {
        ASSERT_LE(max_share - min_share, 1u);
      }
    }
    // The next epoch starts normally at the last world size.
    for (const auto& st : states) {
      auto s = make(p, st.rank, st.world_size);
      s.restore(st);
      while (s.next()) {
      }
      auto fresh = make(p, st.rank, st.world_size);
      fresh.set_epoch(p.epoch + 1);
      while (auto d = s.next()) {
        auto e = fresh.next();
        ASSERT_TRUE(e);
        ASSERT_EQ(d->value, e->value);
      }
      ASSERT_FALSE(fresh.next());
    }
  }
}

TEST(Checkpoint, RejectsEveryTruncation) {
  const auto bytes = encode_checkpoint(sample_state());
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    expect_error([&] { decode_checkpoint(std::span(bytes).first(size), "rank-1-of-3.ckpt"); },
                 CheckpointErrorKind::corrupt, "rank-1-of-3.ckpt");
  }
  TempDir dir;
  write_set(dir.path(), 2, 1);
  const fs::path file = dir.path() / "rank-1-of-2.ckpt";
  const auto bytes_on_disk = read_bytes(file);
  write_bytes(file, std::span(bytes_on_disk).first(40));
  expect_error([&] { load_checkpoint(dir.path(), 0, 2); }, CheckpointErrorKind::corrupt,
               "rank-1-of-2.ckpt");
}

TEST(Checkpoint, RejectsEveryFlippedByte) {
  const auto good = encode_checkpoint(sample_state());
  std::mt19937_64 rng(5);
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (int flip : {0xff, 0x01, 0x80, static_cast<int>(1 + rng() % 255)}) {
      auto bad = good;
      bad[i] ^= static_cast<std::byte>(flip);
      SCOPED_TRACE("byte " + std::to_string(i) + " ^ " + std::to_string(flip));
      try {
        decode_checkpoint(bad, "rank-1-of-3.ckpt");
        ADD_FAILURE() << "a flipped byte was accepted";
      } catch (const CheckpointError& e) {
        // A flip in the envelope's version field reads as an unknown version.
        EXPECT_TRUE(e.kind() == CheckpointErrorKind::corrupt ||
                    e.kind() == CheckpointErrorKind::version)
            << e.what();
        EXPECT_EQ(e.file(), "rank-1-of-3.ckpt");
      }
    }
  }
  std::vector<std::byte> garbage(512);
  for (auto& b : garbage) b = static_cast<std::byte>(rng());
  expect_error([&] { decode_checkpoint(garbage, "g"); }, CheckpointErrorKind::corrupt, "g");
  // On disk: one flipped byte in one rank's file fails the load, naming that file.
  TempDir dir;
  write_set(dir.path(), 3, 1);
  const fs::path file = dir.path() / "rank-2-of-3.ckpt";
  auto bytes = read_bytes(file);
  bytes[bytes.size() - 20] ^= std::byte{0x10};
  write_bytes(file, bytes);
  expect_error([&] { load_checkpoint(dir.path(), 0, 2); }, CheckpointErrorKind::corrupt,
               "rank-2-of-3.ckpt: corrupt: checksum mismatch");
}

TEST(Checkpoint, RejectsAnUnknownFormatVersion) {
  SamplerState s = sample_state();
  s.format_version = 2;
  expect_error([&] { decode_checkpoint(encode_checkpoint(s), "f"); }, CheckpointErrorKind::version,
               "format version 2");
}

TEST(Checkpoint, RejectsAnotherDatasetOrConflictingParameters) {
  TempDir dir;
  write_set(dir.path(), 2, 3);
  auto expected = DistributedRandomSampler(1000, {.seed = 9}).fingerprint();
  EXPECT_NO_THROW(load_checkpoint(dir.path(), 0, 2, {.expected = expected}));
  auto other = expected;
  other.n = 999;
  expect_error([&] { load_checkpoint(dir.path(), 0, 2, {.expected = other}); },
               CheckpointErrorKind::conflict,
               "dataset size n: checkpoint has 1000, caller has 999");
  other = expected;
  other.identity_hash = 5;
  expect_error([&] { load_checkpoint(dir.path(), 0, 2, {.expected = other}); },
               CheckpointErrorKind::conflict, "dataset identity hash");
  other = expected;
  other.seed = 10;
  expect_error([&] { load_checkpoint(dir.path(), 1, 3, {.expected = other}); },
               CheckpointErrorKind::conflict, "seed: checkpoint has 9, caller has 10");
  other = expected;
  other.tail = TailPolicy::drop_last;
  expect_error([&] { load_checkpoint(dir.path(), 0, 2, {.expected = other}); },
               CheckpointErrorKind::conflict,
               "tail policy: checkpoint has none, caller has drop_last");
}

TEST(Checkpoint, RejectsAMissingRankFile) {
  TempDir dir;
  write_set(dir.path(), 4, 2);
  fs::remove(dir.path() / "rank-2-of-4.ckpt");
  expect_error([&] { load_checkpoint(dir.path(), 0, 4); }, CheckpointErrorKind::incomplete,
               "rank-2-of-4.ckpt (missing)");
  expect_error([&] { load_checkpoint(dir.path() / "nope", 0, 4); }, CheckpointErrorKind::not_found,
               "nope");
}

TEST(Checkpoint, RejectsASetOfMixedGenerations) {
  TempDir dir;
  write_set(dir.path(), 2, 5);
  DistributedRandomSampler s(1000, {.rank = 0, .world_size = 2, .seed = 9});
  write_checkpoint(dir.path(), s.state({.watermark = 9}, 6));  // rank 1 never saved 6
  expect_error([&] { load_checkpoint(dir.path(), 0, 2); }, CheckpointErrorKind::incomplete,
               "rank-1-of-2.ckpt (holds generation 5)");
}

TEST(Checkpoint, RejectsMismatchedFiles) {
  TempDir dir;
  write_set(dir.path(), 2, 5);
  fs::copy_file(dir.path() / "rank-0-of-2.ckpt", dir.path() / "rank-1-of-2.ckpt",
                fs::copy_options::overwrite_existing);
  expect_error([&] { load_checkpoint(dir.path(), 0, 2); }, CheckpointErrorKind::mismatched,
               "rank-1-of-2.ckpt: mismatched: holds the state of rank 0 of 2");
  DistributedRandomSampler other(1000, {.rank = 1, .world_size = 2, .seed = 10});
  write_checkpoint(dir.path(), other.state({}, 5));
  expect_error([&] { load_checkpoint(dir.path(), 0, 2); }, CheckpointErrorKind::mismatched,
               "seed: checkpoint has 9, caller has 10");
}

TEST(Checkpoint, TakesTheNewestCompleteSet) {
  TempDir dir;
  write_set(dir.path(), 4, 5);
  write_set(dir.path(), 3, 4);  // older, another world size
  DistributedRandomSampler s(1000, {.rank = 0, .world_size = 2, .seed = 9});
  write_checkpoint(dir.path(), s.state({}, 6));  // a save at W=2 that did not finish
  const auto loaded = load_checkpoint(dir.path(), 1, 2);
  EXPECT_EQ(loaded.generation, 5u);
  EXPECT_EQ(loaded.saved_world_size, 4u);
  EXPECT_EQ(loaded.files.size(), 4u);
  EXPECT_EQ(loaded.state.world_size, 2u);
}

// End to end through the engine: W ranks run pipelines over their samplers (random
// filtering and failures, concurrency and order), stop after a random number of batches, save
// pipeline.committed(); W' ranks load the set and finish the epoch. Every surviving
// sample is delivered exactly once over both runs.
TEST(Checkpoint, PipelinesStopSaveAndResumeAtAnotherWorldSize) {
  using namespace brigade::actors;
  std::mt19937_64 rng(99);
  TempDir root;
  for (int trial = 0; trial < 200; ++trial) {
    Params p{.n = rng() % 4 == 0 ? rng() % 6 : 40 + rng() % 150,
             .seed = rng(),
             .epoch = rng() % 3,
             .tail = static_cast<TailPolicy>(rng() % 3)};
    const int concurrency = 1 + static_cast<int>(rng() % 4);
    const std::uint32_t worlds[2] = {1 + static_cast<std::uint32_t>(rng() % 4),
                                     1 + static_cast<std::uint32_t>(rng() % 4)};
    const Order order = rng() % 2 ? Order::input : Order::completion;
    const fs::path dir = root.path() / std::to_string(trial);
    SCOPED_TRACE("trial " + std::to_string(trial));
    Ids delivered, expected;
    for (int run = 0; run < 2; ++run) {
      const std::uint32_t w = worlds[run];
      for (std::uint32_t r = 0; r < w; ++r) {
        auto sampler = make(p, r, w);
        CommitState resume;
        if (run == 0) {
          while (auto d = sampler.next()) {
            if (d->value.id % 7 != 3 && d->value.id % 11 != 5)
              expected.emplace(d->value.id, d->value.is_padding);
          }
          sampler.set_epoch(p.epoch);
        } else {
          const auto loaded = load_checkpoint(dir, r, w, {.expected = sampler.fingerprint()});
          sampler.restore(loaded.state);
          resume = loaded.state.committed;
        }
        auto pipeline = PipelineBuilder()
                            .add_source(std::ref(sampler))
                            .pipe(
                                [](SampleId s) -> std::optional<SampleId> {
                                  if (s.id % 7 == 3) return std::nullopt;
                                  if (s.id % 11 == 5) throw std::runtime_error("bad sample");
                                  return s;
                                },
                                {.concurrency = concurrency, .output_order = order})
                            .aggregate(3)
                            .add_sink(2)
                            .build({.num_threads = 2, .log_stats_at_end = false});
        pipeline.start(resume);
        const std::uint64_t stop_after = run == 0 ? rng() % 12 : ~0ULL;
        std::uint64_t batches = 0;
        for (auto b = pipeline.next(); b; b = pipeline.next()) {
          for (const auto& s : *b.item) delivered.emplace(s.id, s.is_padding);
          if (++batches == stop_after) break;
        }
        const CommitState committed = pipeline.committed();
        pipeline.stop();
        if (run == 0) write_checkpoint(dir, sampler.state(committed, 1), {.sync = false});
      }
    }
    ASSERT_EQ(delivered, expected);
  }
}

}  // namespace
}  // namespace brigade::transport
