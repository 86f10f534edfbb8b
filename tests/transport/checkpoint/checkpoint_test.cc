#include "transport/checkpoint/checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>
#include <set>

#include "actors/pipeline.h"
#include "tests/actors/random_commit.h"
#include "tests/actors/resume_chain.h"

namespace brigade::transport {
namespace {

namespace fs = std::filesystem;
using actors::CommitState;
using actors::DistributedDeterministicSampler;
using actors::DistributedRandomSampler;
using actors::DistributedSampler;
using actors::MixState;
using actors::SamplerState;
using actors::TailPolicy;
using actors::WeightedMixSampler;
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
               std::uint64_t seed = 9, const WriteOptions& options = {}) {
  for (std::uint32_t r = 0; r < world; ++r) {
    DistributedRandomSampler s(1000, {.rank = r, .world_size = world, .seed = seed});
    write_checkpoint(dir, s.state({.watermark = 5}, generation), options);
  }
}

// The file of rank r of W, generation `generation`, written with RunId{} (job 0).
fs::path file_of(const fs::path& dir, std::uint64_t generation, std::uint32_t r,
                 std::uint32_t world) {
  return dir / checkpoint_file_name(generation, {}, r, world);
}

// The names of the files in `dir`, temporary ones included.
std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

// The generations of the checkpoint files in `dir` (names "gen-<G>.…").
std::multiset<std::uint64_t> generations_in(const fs::path& dir) {
  std::multiset<std::uint64_t> out;
  for (const auto& name : names_in(dir)) {
    if (name.rfind("gen-", 0) == 0) out.insert(std::stoull(name.substr(4)));
  }
  return out;
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
  big.planned = {{900, 0, {{2, 3, 4}}}, {1000, 0, {}}};
  EXPECT_EQ(decode_checkpoint(encode_checkpoint(big), "x"), big);
  const RunId run{.job = 0x1234, .run = 0xabcdef0123456789ULL};
  const auto decoded = decode_checkpoint_file(encode_checkpoint(big, run), "x");
  EXPECT_EQ(decoded.sampler, big);
  EXPECT_EQ(decoded.job, run.job);
  EXPECT_EQ(decoded.run, run.run);

  MixState mix;
  mix.generation = 8;
  mix.fingerprint = {.sources = {s.fingerprint, big.fingerprint},
                     .weights = {0.25, 3.0},
                     .seed = 17,
                     .stop = actors::MixStop::after_count,
                     .count = 99};
  mix.epoch = 3;
  mix.epoch_world_size = 4;
  mix.world_size = 2;
  mix.rank = 1;
  mix.own_sequence = false;
  mix.owned = {{1, 4, 7}, {30, 1, 2}};
  mix.committed = {.watermark = 2, .above = {4}};
  mix.planned = {{0, 4, {{3, 4, 9}}}};
  const auto m = decode_checkpoint_file(encode_checkpoint(mix, run), "m");
  ASSERT_TRUE(m.mix);
  EXPECT_FALSE(m.sampler);
  EXPECT_EQ(*m.mix, mix);
  mix.fingerprint.stop = actors::MixStop::total_count;  // appended to the enum: value 3
  EXPECT_EQ(*decode_checkpoint_file(encode_checkpoint(mix, run), "m").mix, mix);
  mix.fingerprint.stop = actors::MixStop::after_count;
  expect_error([&] { decode_checkpoint(encode_checkpoint(mix), "m"); },
               CheckpointErrorKind::corrupt, "weighted mix");
}

TEST(Checkpoint, WritesAtomicallyAndResumesExactlyAtTheSameWorldSize) {
  TempDir dir;
  write_set(dir.path(), 3, 7);
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path()))
    names.insert(e.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{
                       "gen-7.job-0000000000000000.run-0000000000000000.rank-0-of-3.ckpt",
                       "gen-7.job-0000000000000000.run-0000000000000000.rank-1-of-3.ckpt",
                       "gen-7.job-0000000000000000.run-0000000000000000.rank-2-of-3.ckpt"}));
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
  const fs::path file = file_of(dir.path(), 1, 1, 2);
  const auto bytes_on_disk = read_bytes(file);
  write_bytes(file, std::span(bytes_on_disk).first(40));
  expect_error([&] { load_checkpoint(dir.path(), 0, 2); }, CheckpointErrorKind::corrupt,
               file.filename().string());
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
  const fs::path file = file_of(dir.path(), 1, 2, 3);
  auto bytes = read_bytes(file);
  bytes[bytes.size() - 20] ^= std::byte{0x10};
  write_bytes(file, bytes);
  expect_error([&] { load_checkpoint(dir.path(), 0, 2); }, CheckpointErrorKind::corrupt,
               file.filename().string() + ": corrupt: checksum mismatch");
}

TEST(Checkpoint, RejectsAnUnknownFormatVersion) {
  SamplerState s = sample_state();
  s.format_version = 3;
  expect_error([&] { decode_checkpoint(encode_checkpoint(s), "f"); }, CheckpointErrorKind::version,
               "format version 3, this build reads 1 to 2");
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
  fs::remove(file_of(dir.path(), 2, 2, 4));
  expect_error(
      [&] { load_checkpoint(dir.path(), 0, 4); }, CheckpointErrorKind::incomplete,
      "generation 2 of world size 4, lacks " + file_of("", 2, 2, 4).string() + " (missing)");
  expect_error([&] { load_checkpoint(dir.path() / "nope", 0, 4); }, CheckpointErrorKind::not_found,
               "nope");
}

TEST(Checkpoint, KeepsTheOlderSetWhileTheNewerIsIncomplete) {
  TempDir dir;
  write_set(dir.path(), 2, 5);
  DistributedRandomSampler s(1000, {.rank = 0, .world_size = 2, .seed = 9});
  write_checkpoint(dir.path(), s.state({.watermark = 9}, 6));  // rank 1 never saved 6
  for (std::uint32_t world : {1u, 2u, 3u}) {
    const auto loaded = load_checkpoint(dir.path(), 0, world);
    EXPECT_EQ(loaded.generation, 5u);
  }
  EXPECT_EQ(load_checkpoint(dir.path(), 0, 2).state.committed.watermark, 5u);
  TempDir alone;
  write_checkpoint(alone.path(), s.state({.watermark = 9}, 6));
  expect_error(
      [&] { load_checkpoint(alone.path(), 0, 2); }, CheckpointErrorKind::incomplete,
      "generation 6 of world size 2, lacks " + file_of("", 6, 1, 2).string() + " (missing)");
}

TEST(Checkpoint, RejectsMismatchedFiles) {
  TempDir dir;
  write_set(dir.path(), 2, 5);
  // One rank's file under another rank's name.
  fs::copy_file(file_of(dir.path(), 5, 0, 2), file_of(dir.path(), 5, 1, 2),
                fs::copy_options::overwrite_existing);
  expect_error([&] { load_checkpoint(dir.path(), 0, 2); }, CheckpointErrorKind::mismatched,
               "rank-1-of-2.ckpt: mismatched: its name says rank 1 of 2 but it holds the state "
               "of rank 0 of 2");
  // A set under another generation's names.
  write_set(dir.path(), 2, 5);
  for (std::uint32_t r = 0; r < 2; ++r)
    fs::rename(file_of(dir.path(), 5, r, 2), file_of(dir.path(), 4, r, 2));
  expect_error([&] { load_checkpoint(dir.path(), 0, 2); }, CheckpointErrorKind::mismatched,
               "its name says generation 4 of job 0000000000000000, run 0000000000000000 but it "
               "holds generation 5");
  // Files of one set with different sampling parameters.
  write_set(dir.path(), 2, 5);
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

// The sets resumed the way the job does it: each run checks the directory,
// its ranks (one after the other) save into it, the next run loads the newest set,
// derives its RunId and continues the set in the same directory. Chains 2 → 2,
// 2 → 3, 4 → 3 → 5, 3 → 3 → 1 → 2, ranks stopping around epoch boundaries, samplers
// of both kinds under every tail policy: each epoch delivered exactly once, and the
// directory keeps at most the two newest sets.
TEST(Checkpoint, StraddlingChainsResumeThroughFilesAsAJobDoes) {
  std::mt19937_64 rng(77);
  TempDir root;
  const std::vector<std::vector<std::uint32_t>> chains = {{2, 2}, {2, 3}, {4, 3, 5}, {3, 3, 1, 2}};
  for (int i = 0; i < 96; ++i) {
    const auto& worlds = chains[i % 4];
    const bool random = i / 4 % 2 == 1;
    const auto tail = static_cast<TailPolicy>(i / 8 % 3);
    const std::uint64_t n = rng() % 30, seed = rng();
    const fs::path dir = root.path() / std::to_string(i);
    SCOPED_TRACE("case " + std::to_string(i) + " n=" + std::to_string(n) + " tail " +
                 to_string(tail) + (random ? " random" : " deterministic"));
    auto make = [&](std::uint32_t r, std::uint32_t w) -> DistributedSampler {
      if (random) {
        return DistributedRandomSampler(
            n, {.rank = r, .world_size = w, .seed = seed, .epoch = 1, .tail = tail});
      }
      return DistributedDeterministicSampler(
          n, {.rank = r, .world_size = w, .tail = tail, .epoch = 1});
    };
    RunId run = fresh_run(make(0, worlds[0]).fingerprint(), worlds[0]);
    actors::testing::ResumeChain<DistributedSampler, SamplerState> job(
        make,
        [&](const std::vector<SamplerState>& saved, std::uint32_t w) {
          for (const auto& s : saved) {  // the ranks of the run that ends, one by one
            check_checkpoint_dir(dir, run, s.rank, s.world_size);
            EXPECT_EQ(s.generation, run.first_generation);
            write_checkpoint(dir, s, {.sync = false, .run = run});
          }
          const auto generations = generations_in(dir);
          EXPECT_LE(std::set<std::uint64_t>(generations.begin(), generations.end()).size(), 2u);
          std::vector<SamplerState> out;
          std::optional<RunId> next;
          for (std::uint32_t r = 0; r < w; ++r) {
            const auto loaded = load_checkpoint(dir, r, w, {.expected = make(r, w).fingerprint()});
            EXPECT_EQ(loaded.generation, run.first_generation);
            EXPECT_EQ(loaded.job, run.job);
            const RunId id = resumed_run(loaded, w);
            if (next) {
              EXPECT_EQ(id, *next);  // every rank derives the same id
            }
            next = id;
            out.push_back(loaded.state);
          }
          run = *next;
          return out;
        },
        1, 3);
    job.run(worlds, rng);
    if (HasFatalFailure()) return;
  }
}

// The same for weighted mixes (first_exhausted and after_count): exact at the same
// world size and across world sizes, through files.
TEST(Checkpoint, MixChainsResumeThroughFiles) {
  std::mt19937_64 rng(78);
  TempDir root;
  const std::vector<std::vector<std::uint32_t>> chains = {{2, 2}, {2, 3}, {4, 3, 5}};
  for (int i = 0; i < 48; ++i) {
    const auto& worlds = chains[i % 3];
    const std::uint64_t a = rng() % 25, b = rng() % 12, seed = rng();
    const actors::MixOptions options{.weights = {1.0 + static_cast<double>(rng() % 3), 1.0},
                                     .seed = seed,
                                     .stop = static_cast<actors::MixStop>(i / 3 % 2),
                                     .count = rng() % 30};
    const fs::path dir = root.path() / std::to_string(i);
    SCOPED_TRACE("case " + std::to_string(i) + " sizes " + std::to_string(a) + ", " +
                 std::to_string(b) + " stop " + to_string(options.stop));
    auto make = [&](std::uint32_t r, std::uint32_t w) {
      return WeightedMixSampler(
          {DistributedRandomSampler(a, {.rank = r, .world_size = w, .seed = seed}),
           DistributedDeterministicSampler(
               b, {.rank = r, .world_size = w, .tail = static_cast<TailPolicy>(i % 3)})},
          options);
    };
    RunId run = fresh_run(make(0, worlds[0]).fingerprint(), worlds[0]);
    actors::testing::ResumeChain<WeightedMixSampler, MixState> job(
        make,
        [&](const std::vector<MixState>& saved, std::uint32_t w) {
          for (const auto& s : saved) {
            check_checkpoint_dir(dir, run, s.rank, s.world_size);
            write_checkpoint(dir, s, {.sync = false, .run = run});
          }
          expect_error([&] { load_checkpoint(dir, 0, w); }, CheckpointErrorKind::conflict,
                       "holds a weighted mix's state");
          std::vector<MixState> out;
          for (std::uint32_t r = 0; r < w; ++r) {
            const auto loaded =
                load_mix_checkpoint(dir, r, w, {.expected = make(r, w).fingerprint()});
            run = resumed_run(loaded, w);
            out.push_back(loaded.state);
          }
          return out;
        },
        0, 3);
    job.run(worlds, rng);
    if (HasFatalFailure()) return;
  }
}

TEST(Checkpoint, AMixThatNeverStopsRefusesAnotherWorldSize) {
  TempDir dir;
  for (std::uint32_t r = 0; r < 2; ++r) {
    WeightedMixSampler mix({DistributedRandomSampler(10, {.rank = r, .world_size = 2})},
                           {.weights = {1}, .stop = actors::MixStop::never});
    write_checkpoint(dir.path(), mix.state({.watermark = 4}, 1));
  }
  EXPECT_EQ(load_mix_checkpoint(dir.path(), 1, 2).state.committed.watermark, 4u);
  expect_error([&] { load_mix_checkpoint(dir.path(), 0, 3); }, CheckpointErrorKind::conflict,
               "stop policy 'never' has no end to divide among other ranks; resume it at its "
               "saved world size 2");
  expect_error([&] { load_checkpoint(dir.path(), 0, 2); }, CheckpointErrorKind::conflict,
               "load it with load_mix_checkpoint");
}

TEST(Checkpoint, KeepsTheNewestCompleteSetsAndPrunesOlderOnes) {
  for (std::uint32_t keep : {1u, 2u, 3u, 0u}) {
    SCOPED_TRACE("keep " + std::to_string(keep));
    TempDir dir;
    for (std::uint64_t g = 1; g <= 5; ++g)
      write_set(dir.path(), 2, g, 9, {.sync = false, .keep = keep});
    std::multiset<std::uint64_t> expected;
    for (std::uint64_t g = keep == 0 ? 1 : 6 - keep; g <= 5; ++g) expected.insert({g, g});
    EXPECT_EQ(generations_in(dir.path()), expected);
    // A save in progress (rank 1 has not written 6): nothing newer than or equal to
    // the newest complete set goes, and the set in progress stays.
    DistributedRandomSampler s(1000, {.rank = 0, .world_size = 2, .seed = 9});
    write_checkpoint(dir.path(), s.state({}, 6), {.sync = false, .keep = keep});
    expected.insert(6);
    EXPECT_EQ(generations_in(dir.path()), expected);
    EXPECT_EQ(load_checkpoint(dir.path(), 0, 3).generation, 5u);
  }
  // Sets of other world sizes count the same; a file set older than the kept ones
  // goes with its temporary files.
  TempDir dir;
  write_set(dir.path(), 3, 1, 9, {.sync = false});
  write_bytes(dir.path() / ("." + file_of("", 1, 1, 3).string() + ".tmp-123"), {});
  write_set(dir.path(), 2, 2, 9, {.sync = false});
  write_set(dir.path(), 4, 3, 9, {.sync = false});
  EXPECT_EQ(generations_in(dir.path()), (std::multiset<std::uint64_t>{2, 2, 3, 3, 3, 3}));
  EXPECT_EQ(names_in(dir.path()).size(), 6u);
}

// A rank that crashes mid-save leaves a temporary file and no file of the new
// generation: the older complete set still loads at any world size, exactly.
TEST(Checkpoint, ACrashMidSaveLeavesTheOlderSetLoadableAtAnyWorldSize) {
  TempDir dir;
  std::vector<SamplerState> gen2;
  for (std::uint64_t g = 1; g <= 3; ++g) {
    for (std::uint32_t r = 0; r < 3; ++r) {
      DistributedRandomSampler s(100, {.rank = r, .world_size = 3, .seed = 4});
      const auto state = s.state({.watermark = 3 * g + r}, g);
      if (g == 2) gen2.push_back(state);
      if (g == 3 && r == 1) {  // the crash: a partial temporary file, no rename
        const auto bytes = encode_checkpoint(state);
        write_bytes(dir.path() / ("." + file_of("", 3, 1, 3).string() + ".tmp-999"),
                    std::span(bytes).first(24));
        continue;
      }
      write_checkpoint(dir.path(), state, {.sync = false});
    }
  }
  for (std::uint32_t world : {3u, 2u, 5u}) {
    for (std::uint32_t r = 0; r < world; ++r) {
      const auto loaded = load_checkpoint(dir.path(), r, world);
      EXPECT_EQ(loaded.generation, 2u);
      EXPECT_EQ(loaded.state, world == 3 ? gen2[r] : actors::repartition(gen2, r, world));
    }
  }
  // The crashed rank's next start removes its stale temporary file.
  const auto temp = dir.path() / ("." + file_of("", 3, 1, 3).string() + ".tmp-999");
  ASSERT_TRUE(fs::exists(temp));
  check_checkpoint_dir(dir.path(), {.resumed = true}, 0, 3);
  EXPECT_TRUE(fs::exists(temp));  // another rank's: left alone
  check_checkpoint_dir(dir.path(), {.resumed = true}, 1, 3);
  EXPECT_FALSE(fs::exists(temp));
}

TEST(Checkpoint, FailedWritesAreIoErrorsAndLeaveNoTemporaryFile) {
  TempDir dir;
  write_bytes(dir.path() / "file", {});
  SamplerState s = sample_state();
  // A directory that cannot exist: below a regular file.
  expect_error([&] { write_checkpoint(dir.path() / "file" / "ckpt", s); }, CheckpointErrorKind::io,
               "cannot create the directory");
  expect_error([&] { check_checkpoint_dir(dir.path() / "file" / "ckpt", {}, 0, 1); },
               CheckpointErrorKind::io, "cannot create the directory");
  expect_error([&] { check_checkpoint_dir(dir.path() / "file", {}, 0, 1); },
               CheckpointErrorKind::io, "");
  // The rename fails (a directory holds the file's name): the temporary file goes.
  const fs::path ckpt = dir.path() / "ckpt";
  fs::create_directories(ckpt / checkpoint_file_name(s.generation, {}, s.rank, s.world_size) / "x");
  expect_error([&] { write_checkpoint(ckpt, s); }, CheckpointErrorKind::io,
               "cannot rename the temporary file into place");
  for (const auto& name : names_in(ckpt)) EXPECT_EQ(name.find(".tmp"), std::string::npos) << name;
  // A read-only file system refuses the probe.
  if (fs::is_directory("/proc/self")) {
    expect_error([&] { check_checkpoint_dir("/proc/self", {}, 0, 1); }, CheckpointErrorKind::io,
                 "/proc/self");
  }
  // A writable directory passes and keeps nothing of the probe.
  check_checkpoint_dir(dir.path() / "fresh", {}, 0, 1);
  EXPECT_TRUE(names_in(dir.path() / "fresh").empty());
}

// Files of the layout before generations: rank-R-of-W.ckpt, format version 1, written
// by the previous build (bytes kept here). They load (migration) at any world size;
// a run resumed from them continues job 0 in the new layout and prunes them.
TEST(Checkpoint, LoadsTheLegacyLayout) {
  auto unhex = [](const std::string& hex) {
    std::vector<std::byte> out;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
      out.push_back(static_cast<std::byte>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    return out;
  };
  // DistributedRandomSampler(10, {.rank = r, .world_size = 2, .seed = 3,
  // .identity_hash = 0x1e9}).state(c, 4) with c = {2} for rank 0, {1, {2}} for rank 1.
  const auto rank0 = unhex(
      "0000000019000000000000000200010042524947434b505448d042e8010000000100000042050000000000001400"
      "0000"
      "00000000060003000100000002000000040000000000000000000000000000000a00000000000000000000000000"
      "0000"
      "020000000000000008000000060000001d0000001f00000029000000050000000a00000000000000e90100000000"
      "0000"
      "010000000000000003000000000000000a0000000000000000000000000000000400000003000000000000000000"
      "0000"
      "02000000000000000500000000000000");
  const auto rank1 = unhex(
      "000000001a000000000000000200010042524947434b5054cfad84f6010000000100000082050000000000001500"
      "0000"
      "00000000060003000100000002000000040000000000000000000000000000000a00000000000000010000000000"
      "0000"
      "010000000000000008000000060000001d0000001f000000290000000d0000000a00000000000000e90100000000"
      "0000"
      "010000000000000003000000000000000a0000000000000000000000000000000400000003000000010000000000"
      "0000"
      "020000000000000005000000000000000200000000000000");
  TempDir dir;
  write_bytes(dir.path() / "rank-0-of-2.ckpt", rank0);
  write_bytes(dir.path() / "rank-1-of-2.ckpt", rank1);
  auto make = [](std::uint32_t r, std::uint32_t w) {
    return DistributedRandomSampler(
        10, {.rank = r, .world_size = w, .seed = 3, .identity_hash = 0x1e9});
  };
  for (std::uint32_t r = 0; r < 2; ++r) {
    const auto loaded = load_checkpoint(dir.path(), r, 2, {.expected = make(r, 2).fingerprint()});
    EXPECT_EQ(loaded.generation, 4u);
    EXPECT_EQ(loaded.job, 0u);
    SamplerState expected = make(r, 2).state(
        r == 0 ? CommitState{.watermark = 2} : CommitState{.watermark = 1, .above = {2}}, 4);
    expected.format_version = 1;
    EXPECT_EQ(loaded.state, expected);
  }
  // Re-partitioned at W = 3: exactly the 10 - 2 - 2 samples left.
  Ids left, got;
  for (std::uint32_t r = 0; r < 2; ++r) {
    auto s = make(r, 2);
    const CommitState c =
        r == 0 ? CommitState{.watermark = 2} : CommitState{.watermark = 1, .above = {2}};
    while (auto d = s.next())
      if (!c.committed(d->position)) left.emplace(d->value.id, d->value.is_padding);
  }
  RunId run;
  for (std::uint32_t r = 0; r < 3; ++r) {
    const auto loaded = load_checkpoint(dir.path(), r, 3);
    auto s = make(r, 3);
    s.restore(loaded.state);
    while (auto d = s.next()) got.emplace(d->value.id, d->value.is_padding);
    run = resumed_run(loaded, 3);
    check_checkpoint_dir(dir.path(), run, r, 3);  // the legacy files are this job's
    write_checkpoint(dir.path(), s.state({.watermark = s.size()}, run.first_generation),
                     {.sync = false, .run = run, .keep = 1});
  }
  EXPECT_EQ(got, left);
  EXPECT_EQ(left.size(), 6u);
  EXPECT_EQ(run.job, 0u);
  EXPECT_EQ(run.first_generation, 5u);
  EXPECT_EQ(load_checkpoint(dir.path(), 0, 3).generation, 5u);
  EXPECT_FALSE(fs::exists(dir.path() / "rank-0-of-2.ckpt"));  // pruned with keep = 1
  EXPECT_FALSE(fs::exists(dir.path() / "rank-1-of-2.ckpt"));
  // A fresh run refuses them.
  TempDir legacy;
  write_bytes(legacy.path() / "rank-1-of-2.ckpt", rank1);
  expect_error(
      [&] { check_checkpoint_dir(legacy.path(), fresh_run(make(0, 2).fingerprint(), 2), 0, 2); },
      CheckpointErrorKind::conflict, "rank-1-of-2.ckpt");
}

TEST(Checkpoint, RunIdsAreTheSameOnEveryRankAndDifferPerJob) {
  const auto f = DistributedRandomSampler(100, {.seed = 1}).fingerprint();
  const RunId a = fresh_run(f, 4);
  EXPECT_EQ(a, fresh_run(f, 4));
  EXPECT_NE(a.job, 0u);
  EXPECT_EQ(a.job, a.run);
  EXPECT_EQ(a.first_generation, 1u);
  EXPECT_FALSE(a.resumed);
  EXPECT_NE(a.job, fresh_run(f, 3).job);
  EXPECT_NE(a.job, fresh_run(f, 4, "slurm 77.0").job);
  EXPECT_NE(a.job, fresh_run(DistributedRandomSampler(100, {.seed = 2}).fingerprint(), 4).job);
  LoadedCheckpoint loaded;
  loaded.job = a.job;
  loaded.run = a.run;
  loaded.generation = 7;
  const RunId b = resumed_run(loaded, 2);
  EXPECT_EQ(b.job, a.job);
  EXPECT_NE(b.run, a.run);
  EXPECT_EQ(b.first_generation, 8u);
  EXPECT_TRUE(b.resumed);
  EXPECT_NE(b.run, resumed_run(loaded, 3).run);
  EXPECT_NE(b.run, resumed_run(loaded, 2, "torchelastic 5").run);
  loaded.generation = 8;
  EXPECT_NE(b.run, resumed_run(loaded, 2).run);
}

TEST(Checkpoint, AFreshRunRefusesADirectoryInUse) {
  TempDir dir;
  const auto f = DistributedRandomSampler(1000, {.seed = 9}).fingerprint();
  const RunId run = fresh_run(f, 2);
  check_checkpoint_dir(dir.path(), run, 0, 2);  // empty
  DistributedRandomSampler r0(1000, {.rank = 0, .world_size = 2, .seed = 9});
  write_checkpoint(dir.path(), r0.state({}, 1), {.run = run});
  // Ranks that run one after the other: rank 1 starts after rank 0 saved.
  check_checkpoint_dir(dir.path(), run, 1, 2);
  // Rank 0 again, or the same job once more: its own file is an earlier run's.
  expect_error([&] { check_checkpoint_dir(dir.path(), run, 0, 2); }, CheckpointErrorKind::conflict,
               "holds checkpoint files of an earlier run of this job; resume it with "
               "--resume-from " +
                   dir.path().string() + ", or use an empty directory for a fresh run");
  // Another job (another world size): refused on every rank.
  for (std::uint32_t r = 0; r < 3; ++r) {
    expect_error([&] { check_checkpoint_dir(dir.path(), fresh_run(f, 3), r, 3); },
                 CheckpointErrorKind::conflict, "holds checkpoint files of another job");
  }
  // A resumed run of this job in the directory: a fresh run there is refused too.
  DistributedRandomSampler r1(1000, {.rank = 1, .world_size = 2, .seed = 9});
  write_checkpoint(dir.path(), r1.state({}, 1), {.run = run});
  const RunId resumed = resumed_run(load_checkpoint(dir.path(), 0, 2), 2);
  write_checkpoint(dir.path(), r0.state({}, 2), {.run = resumed});
  TempDir other;
  fs::copy_file(dir.path() / checkpoint_file_name(2, resumed, 0, 2),
                other.path() / checkpoint_file_name(2, resumed, 0, 2));
  expect_error([&] { check_checkpoint_dir(other.path(), run, 1, 2); },
               CheckpointErrorKind::conflict, "earlier run of this job");
}

TEST(Checkpoint, AResumedRunContinuesItsSetAndRefusesAnotherJobs) {
  TempDir a, b;
  const auto f = DistributedRandomSampler(1000, {.seed = 9}).fingerprint();
  const RunId first = fresh_run(f, 2);
  write_set(a.path(), 2, 1, 9, {.run = first});
  // Resumed into the same directory: continues the set with generation 2.
  const auto loaded = load_checkpoint(a.path(), 0, 3);
  const RunId second = resumed_run(loaded, 3);
  EXPECT_EQ(second.first_generation, 2u);
  for (std::uint32_t r = 0; r < 3; ++r) check_checkpoint_dir(a.path(), second, r, 3);
  write_set(a.path(), 3, 2, 9, {.run = second});
  EXPECT_EQ(load_checkpoint(a.path(), 0, 3).generation, 2u);
  EXPECT_EQ(load_checkpoint(a.path(), 0, 3).run, second.run);
  // Into an empty directory, or one with only older sets of this job: fine.
  check_checkpoint_dir(b.path(), second, 0, 3);
  write_set(b.path(), 2, 1, 9, {.run = first});
  check_checkpoint_dir(b.path(), second, 0, 3);
  // Into a directory with another job's files: refused.
  TempDir c;
  write_set(c.path(), 2, 1, 10,
            {.run = fresh_run(DistributedRandomSampler(1000, {.seed = 10}).fingerprint(), 2)});
  expect_error([&] { check_checkpoint_dir(c.path(), second, 0, 3); }, CheckpointErrorKind::conflict,
               "holds checkpoint files of another job; write this job's checkpoints into the "
               "directory it resumed from or an empty one");
  // Resuming generation 1 again into `a`, which holds this job's complete set 2 of
  // another run: that set would shadow this run's saves.
  TempDir copy;
  write_set(copy.path(), 2, 1, 9, {.run = first});
  const RunId again = resumed_run(load_checkpoint(copy.path(), 0, 3, {}), 3, "another launch");
  expect_error([&] { check_checkpoint_dir(a.path(), again, 0, 3); }, CheckpointErrorKind::conflict,
               "holds a complete set of generation 2 of this job written by another run");
}

// The 112 duplicates: job A (2 ranks) saved generations 1-3 into DIR; a fresh
// job B at 3 ranks over the same data writes into DIR, and a later resume took A's
// generation 3 — A's state, not B's. Now B is refused before it reads a sample, and a
// resume from a directory holding both jobs' files (B forced its way in) is refused
// rather than mixing them.
TEST(Checkpoint, AnotherJobsNewerGenerationIsNeverResumed) {
  TempDir dir;
  auto make = [](std::uint32_t r, std::uint32_t w) {
    return DistributedRandomSampler(300, {.rank = r, .world_size = w, .seed = 5});
  };
  RunId a = fresh_run(make(0, 2).fingerprint(), 2);
  for (std::uint64_t g = 1; g <= 3; ++g) {
    for (std::uint32_t r = 0; r < 2; ++r) {
      check_checkpoint_dir(dir.path(), a, r, 2);
      write_checkpoint(dir.path(), make(r, 2).state({.watermark = 40 * g}, g),
                       {.sync = false, .run = a});
    }
    a = resumed_run(load_checkpoint(dir.path(), 0, 2), 2);
  }
  const RunId b = fresh_run(make(0, 3).fingerprint(), 3);
  for (std::uint32_t r = 0; r < 3; ++r) {
    expect_error([&] { check_checkpoint_dir(dir.path(), b, r, 3); }, CheckpointErrorKind::conflict,
                 "resume that job with --resume-from");
  }
  // B writes its generation 1 anyway (without the check).
  for (std::uint32_t r = 0; r < 3; ++r)
    write_checkpoint(dir.path(), make(r, 3).state({.watermark = 30}, 1), {.sync = false, .run = b});
  expect_error([&] { load_checkpoint(dir.path(), 0, 3); }, CheckpointErrorKind::conflict,
               "holds the checkpoints of 2 jobs");
  // B's writes did not prune A's sets: moving B's files away resumes A exactly.
  for (std::uint32_t r = 0; r < 3; ++r) fs::remove(dir.path() / checkpoint_file_name(1, b, r, 3));
  const auto loaded = load_checkpoint(dir.path(), 1, 2);
  EXPECT_EQ(loaded.generation, 3u);
  EXPECT_EQ(loaded.state.committed.watermark, 120u);
}

}  // namespace
}  // namespace brigade::transport
