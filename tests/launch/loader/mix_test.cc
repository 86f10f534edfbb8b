// Several datasets mixed by weight ([[sources]]; launch/loader/job.h MIXING): the joined
// dataset, the mix's draws, batches that name each sample's source, exact and elastic
// resume, equal per-rank counts, and the config's errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "launch/loader/dataset.h"
#include "launch/loader/detail/job_sampling.h"
#include "launch/loader/job.h"
#include "launch/loader/job_settings.h"
#include "launch/loader/remote_ops.h"
#include "launch/loader/sources.h"
#include "media/synthetic.h"
#include "transport/remote/remote.h"

namespace brigade::launch::mix_test {  // its own: the tests of one target share a unity batch
namespace {

namespace fs = std::filesystem;

const Getenv kNoEnv = [](const char*) -> const char* { return nullptr; };

// Source "a": class folders a0 (5 images), a1 (4); source "b": b0 (3), b1 (2), b2 (3).
class MixedJob : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("brigade-mix-" + std::to_string(std::random_device{}()));
    const std::vector<std::pair<std::string, int>> classes{
        {"a/a0", 5}, {"a/a1", 4}, {"b/b0", 3}, {"b/b1", 2}, {"b/b2", 3}};
    int seed = 0;
    for (const auto& [folder, n] : classes) {
      fs::create_directories(root_ / folder);
      for (int i = 0; i < n; ++i) {
        media::write_file((root_ / folder / ("img-" + std::to_string(i) + ".jpg")).string(),
                          media::make_image(media::ImageCodec::jpeg, 40, 30, ++seed));
      }
    }
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  // The job of `toml` (with the two sources appended) at rank r of w.
  static RunConfig config(const std::string& toml, std::uint32_t rank = 0, std::uint32_t w = 1) {
    RunConfig c;
    apply_toml(c,
               toml + "\nbatch_size = 2\nthreads = 2\nsize = 16\nresize = 16\n" +
                   "[[sources]]\nname = \"a\"\ndata = \"" + (root_ / "a").string() +
                   "\"\nlabels = \"folder\"\nweight = 3\n" +
                   "[[sources]]\nname = \"b\"\ndata = \"" + (root_ / "b").string() +
                   "\"\nlabels = \"folder\"\nweight = 1\n",
               "mix.toml");
    c.rank = rank;
    c.world_size = w;
    resolve(c, kNoEnv);
    return c;
  }

  static inline fs::path root_;
};

std::vector<JobBatch> drain(Job& job, std::size_t most = ~std::size_t{0}) {
  std::vector<JobBatch> out;
  while (out.size() < most) {
    auto r = job.next();
    if (r.status != JobStatus::batch) break;
    out.push_back(std::move(*r.batch));
  }
  return out;
}

std::vector<std::uint64_t> ids_of(const std::vector<JobBatch>& batches) {
  std::vector<std::uint64_t> ids;
  for (const auto& b : batches) ids.insert(ids.end(), b.ids.begin(), b.ids.end());
  return ids;
}

TEST(JoinedDataset, KeepsEachSourcesIdentitiesLocationsAndLabels) {
  Dataset a("/data/a");
  a.set_classes({"cat", "dog"});
  a.add({.identity = "cat/1.jpg", .label = 0});
  a.add({.identity = "dog/2.jpg", .label = 1});
  Dataset b("/data/b");
  b.set_classes({"car"});
  b.add({.identity = "car/3.jpg", .label = 0});
  const auto hash_a = a.identity_hash();
  const auto d = Dataset::join({a, b}, {"animals", "vehicles"});
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d.path(1), "/data/a/dog/2.jpg");
  EXPECT_EQ(d.path(2), "/data/b/car/3.jpg");
  EXPECT_EQ(d.label(2), 0);  // its own source's class index
  EXPECT_TRUE(d.classes().empty());
  ASSERT_EQ(d.sources().size(), 2u);
  EXPECT_EQ(d.sources()[1].offset, 2u);
  EXPECT_EQ(d.sources()[1].classes, std::vector<std::string>{"car"});
  EXPECT_EQ(d.sources()[0].identity_hash, hash_a);
  EXPECT_EQ(d.source_of(0), 0u);
  EXPECT_EQ(d.source_of(1), 0u);
  EXPECT_EQ(d.source_of(2), 1u);
  // Another name or order is another dataset (checkpoints, remote workers).
  EXPECT_NE(d.identity_hash(), Dataset::join({a, b}, {"animals", "cars"}).identity_hash());
  EXPECT_NE(d.identity_hash(), Dataset::join({b, a}, {"vehicles", "animals"}).identity_hash());
  Dataset unlabelled("/data/c");
  unlabelled.add({.identity = "x.jpg"});
  try {
    Dataset::join({a, unlabelled}, {"animals", "loose"});
    FAIL() << "a labelled and an unlabelled source were joined";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("source 1 (loose): has no labels"), std::string::npos)
        << e.what();
  }
}

// The mix draws each source with its weight's share (4000 draws, 1:3, seeded: within
// 2 points), and a source's draws run through its samples before repeating one.
TEST(JobSampling, DrawsFollowTheWeights) {
  Dataset small, large;
  for (int i = 0; i < 1000; ++i) small.add({.identity = "s" + std::to_string(i)});
  for (int i = 0; i < 3000; ++i) large.add({.identity = "l" + std::to_string(i)});
  const auto d = Dataset::join({small, large}, {"small", "large"});
  RunConfig c;
  c.sources = {{.name = "small", .weight = 1, .listing = {.data = "x"}},
               {.name = "large", .weight = 3, .listing = {.data = "y"}}};
  c.seed = 11;
  c.rank = 0;
  c.world_size = 1;
  detail::JobSampling sampling(c, d);
  std::vector<std::uint64_t> per_source(2);
  std::set<std::uint64_t> small_seen;  // of its first 1000 draws: one epoch of it
  std::uint64_t draws = 0;
  while (auto s = sampling.next()) {
    ++draws;
    ++per_source[d.source_of(s->value.id)];
    if (s->value.id < 1000 && per_source[0] <= 1000) small_seen.insert(s->value.id);
  }
  EXPECT_EQ(draws, 4000u);  // N = the sources' sizes
  EXPECT_NEAR(static_cast<double>(per_source[0]) / 4000.0, 0.25, 0.02) << per_source[0];
  EXPECT_EQ(small_seen.size(), std::min<std::uint64_t>(per_source[0], 1000));
  c.epoch_samples = 100;
  detail::JobSampling hundred(c, d);
  EXPECT_EQ(hundred.size_of(0), 100u);
}

// Every batch says each sample's source; its label is its own source's class index.
TEST_F(MixedJob, BatchesCarryEachSamplesSourceAndItsOwnLabel) {
  const auto c = config("seed = 5");
  const auto d = open_dataset(c, false);
  ASSERT_EQ(d.sources().size(), 2u);
  EXPECT_EQ(d.size(), 17u);
  Job job(c, d);
  job.begin_epoch();
  const auto batches = drain(job);
  std::vector<std::uint64_t> per_source(2);
  std::uint64_t samples = 0;
  for (const auto& b : batches) {
    ASSERT_EQ(b.sources.size(), b.ids.size());
    ASSERT_EQ(b.labels.size(), b.ids.size());
    for (std::size_t i = 0; i < b.ids.size(); ++i) {
      const auto source = static_cast<std::uint32_t>(b.sources[i]);
      EXPECT_EQ(source, d.source_of(b.ids[i]));
      const auto& classes = d.sources()[source].classes;
      const auto path = d.path(b.ids[i]);
      // The label names the sample's own class folder in its own source.
      EXPECT_NE(path.find("/" + classes.at(static_cast<std::size_t>(b.labels[i])) + "/"),
                std::string::npos)
          << path;
      ++per_source[source];
      ++samples;
    }
  }
  EXPECT_EQ(samples, 17u);  // N = 9 + 8 draws
  EXPECT_GT(per_source[0], per_source[1]);
}

// A checkpoint mid-epoch resumes exactly where the uninterrupted run would go on.
TEST_F(MixedJob, ExactResumeMidEpochEqualsTheUninterruptedRun) {
  const auto c = config("seed = 9\nepochs = 2");
  const auto d = open_dataset(c, false);
  Job whole(c, d);
  whole.begin_epoch();
  const auto all = ids_of(drain(whole));
  Job first(c, d);
  first.begin_epoch();
  auto head = ids_of(drain(first, 3));
  const std::vector<std::vector<std::byte>> files{first.checkpoint_bytes()};
  const auto resume = checkpoint_from_files(files, 0, 1);
  ASSERT_TRUE(std::holds_alternative<transport::LoadedMixCheckpoint>(resume));
  Job second(c, d, {.resume = resume});
  second.begin_epoch();
  const auto tail = ids_of(drain(second));
  head.insert(head.end(), tail.begin(), tail.end());
  EXPECT_EQ(head, all);
  // Epoch 1 is another draw.
  whole.begin_epoch();
  EXPECT_NE(ids_of(drain(whole)), all);
}

// 2 → 3 ranks mid-epoch: what the three deliver after the resume plus what the two
// delivered before is the two ranks' uninterrupted epoch, as a multiset; fresh epochs
// give every rank the same number of batches (ceil(N / W) draws each).
TEST_F(MixedJob, ElasticResumeFromTwoRanksToThreeDeliversTheEpochOnce) {
  std::multiset<std::uint64_t> uninterrupted, delivered;
  std::vector<std::vector<std::byte>> files;
  for (std::uint32_t r = 0; r < 2; ++r) {
    const auto c = config("seed = 4", r, 2);
    const auto d = open_dataset(c, false);
    Job whole(c, d);
    EXPECT_EQ(whole.batches_in_epoch(0), 5u);  // ceil(17 / 2) = 9 draws, batches of 2
    whole.begin_epoch();
    const auto all = ids_of(drain(whole));
    EXPECT_EQ(all.size(), 9u);
    uninterrupted.insert(all.begin(), all.end());
    Job part(c, d);
    part.begin_epoch();
    const auto head = ids_of(drain(part, 1 + r));
    delivered.insert(head.begin(), head.end());
    files.push_back(part.checkpoint_bytes());
  }
  std::vector<std::uint64_t> counts;
  for (std::uint32_t r = 0; r < 3; ++r) {
    const auto c = config("seed = 4", r, 3);
    const auto d = open_dataset(c, false);
    Job resumed(c, d, {.resume = checkpoint_from_files(files, r, 3)});
    resumed.begin_epoch();
    const auto rest = ids_of(drain(resumed));
    delivered.insert(rest.begin(), rest.end());
    counts.push_back(rest.size());
    // The next epoch is fresh at W = 3: ceil(17 / 3) = 6 draws on every rank.
    EXPECT_EQ(resumed.batches_in_epoch(1), 3u);
    resumed.begin_epoch();
    EXPECT_EQ(ids_of(drain(resumed)).size(), 6u);
  }
  EXPECT_EQ(delivered, uninterrupted);
  EXPECT_LE(*std::max_element(counts.begin(), counts.end()) -
                *std::min_element(counts.begin(), counts.end()),
            1u);
}

// A source of tar shards beside a folder: members keep their byte ranges in the joined
// dataset, and the job (block shuffle within the shards source) reads every sample.
TEST_F(MixedJob, AShardsSourceMixesWithAFolderSource) {
  const auto src = root_ / "shard-members";
  fs::create_directories(src);
  std::vector<std::string> names[2];
  for (int k = 0; k < 6; ++k) {
    const auto key = "s" + std::to_string(k);
    media::write_file((src / (key + ".jpg")).string(),
                      media::make_image(media::ImageCodec::jpeg, 40, 30, 100 + k));
    media::write_file((src / (key + ".cls")).string(),
                      std::vector<std::uint8_t>{static_cast<std::uint8_t>('0' + k % 2)});
    names[k / 3].push_back(key + ".jpg");
    names[k / 3].push_back(key + ".cls");
  }
  for (int s = 0; s < 2; ++s) {
    std::string cmd = "tar --format=gnu -cf '" +
                      (root_ / ("part-" + std::to_string(s) + ".tar")).string() + "' -C '" +
                      src.string() + "' --no-recursion";
    for (const auto& n : names[s]) cmd += " '" + n + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  RunConfig c;
  apply_toml(c,
             "batch_size = 4\nthreads = 2\nsize = 16\nresize = 16\nshuffle_window = 1\n"
             "[[sources]]\ndata = \"" +
                 (root_ / "a").string() +
                 "\"\nlabels = \"folder\"\n"
                 "[[sources]]\nshards = [\"" +
                 (root_ / "part-{0..1}.tar").string() + "\"]\n",
             "mix.toml");
  c.rank = 0;
  c.world_size = 1;
  resolve(c, kNoEnv);
  const auto d = open_dataset(c, false);
  const auto shards = open_dataset(source_config(c, c.sources[1]), false);
  ASSERT_EQ(d.size(), 9u + 6u);
  ASSERT_EQ(d.sources()[1].containers, 2u);
  for (std::size_t i = 0; i < shards.size(); ++i) {
    EXPECT_EQ(d.location(9 + i), shards.location(i));
    EXPECT_EQ(d.label(9 + i), shards.label(i));
  }
  EXPECT_EQ(d.location(0).size, kWholeFile);
  EXPECT_THROW(d.container_of(0), std::logic_error);
  Job job(c, d);
  job.begin_epoch();
  std::uint64_t samples = 0, from_shards = 0;
  for (const auto& b : drain(job)) {
    EXPECT_TRUE(b.failed.empty());
    samples += b.ids.size();
    from_shards += static_cast<std::uint64_t>(std::count(b.sources.begin(), b.sources.end(), 1));
  }
  EXPECT_EQ(samples, 15u);
  EXPECT_EQ(job.counts().failed, 0u);
  EXPECT_GT(from_shards, 0u);
}

// The batches of a job over `c`: ids, sources and a digest of the pixels each.
std::vector<std::string> digests(const RunConfig& c, const Dataset& d) {
  std::vector<std::string> out;
  run_job(c, d, {.on_batch = [&](const JobBatch& b) {
            std::uint64_t h = 1469598103934665603ull;
            const auto* p = static_cast<const unsigned char*>(b.data.data());
            for (std::size_t i = 0; i < b.data.nbytes(); ++i) h = (h ^ p[i]) * 1099511628211ull;
            std::string line = std::to_string(h) + ":";
            for (std::size_t i = 0; i < b.ids.size(); ++i)
              line += " " + std::to_string(b.ids[i]) + "/" + std::to_string(b.sources[i]);
            out.push_back(line);
          }});
  return out;
}

// A remote worker serves a mix as one dataset: without a listing (the tasks carry each
// sample's location) and with the trainer's own joined listing (`brigade worker
// --config`: its locations and fingerprint); the batches are the local run's, byte for
// byte (on_no_workers = fail: nothing is decoded here).
TEST_F(MixedJob, ARemoteWorkerServesTheMixByteForByte) {
  const auto local = config("seed = 2");
  const auto d = open_dataset(local, false);
  const auto want = digests(local, d);
  ASSERT_EQ(want.size(), 9u);
  std::vector<SampleLocation> own;
  for (std::size_t i = 0; i < d.size(); ++i) own.push_back(d.location(i));
  const transport::Security security{.token = "mix test"};
  for (const bool serves_own : {false, true}) {
    transport::OperationRegistry registry;
    register_decode_operations(registry, serves_own ? own : std::vector<SampleLocation>{});
    transport::WorkerOptions wo;
    wo.threads = 2;
    wo.security = security;
    wo.fingerprint = serves_own ? d.identity_hash() : 0;
    transport::WorkerNode worker(wo, std::move(registry));
    RunConfig c;
    apply_toml(c,
               "seed = 2\nbatch_size = 2\nthreads = 2\nsize = 16\nresize = 16\n"
               "[remote]\non_no_workers = \"fail\"\n"
               "[[sources]]\nname = \"a\"\ndata = \"" +
                   (root_ / "a").string() +
                   "\"\nlabels = \"folder\"\nweight = 3\n[[sources]]\nname = \"b\"\ndata = \"" +
                   (root_ / "b").string() + "\"\nlabels = \"folder\"\nweight = 1\n",
               "mix.toml");
    c.rank = 0;
    c.world_size = 1;
    c.workers = {worker.address()};
    resolve(c, [](const char* name) -> const char* {
      return std::string_view(name) == "BRIGADE_TOKEN" ? "mix test" : nullptr;
    });
    EXPECT_EQ(digests(c, d), want) << (serves_own ? "serving its own listing" : "no listing");
  }
}

// A plain job's checkpoint does not resume a mix, nor the reverse.
TEST_F(MixedJob, ACheckpointOfTheOtherKindIsRefused) {
  const auto mixed = config("seed = 1");
  const auto d = open_dataset(mixed, false);
  RunConfig plain;
  plain.data = (root_ / "a").string();
  plain.rank = 0;
  plain.world_size = 1;
  resolve(plain, kNoEnv);
  const auto single = open_dataset(plain, false);
  Job one(plain, single);
  const std::vector<std::vector<std::byte>> files{one.checkpoint_bytes()};
  try {
    Job job(mixed, d, {.resume = checkpoint_from_files(files, 0, 1)});
    FAIL() << "a sampler's checkpoint resumed a mix";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("this job mixes [[sources]]"), std::string::npos)
        << e.what();
  }
}

std::string error_of(const std::string& toml, bool resolve_too = true) {
  try {
    RunConfig c;
    apply_toml(c, toml, "run.toml");
    if (resolve_too) resolve(c, kNoEnv);
  } catch (const ConfigError& e) {
    return std::string(e.what()) + " [key " + e.key() + "]";
  }
  return "no error";
}

TEST(SourcesConfig, BadTablesAreNamedByIndexAndKey) {
  const std::string a = "[[sources]]\ndata = \"a\"\n";
  EXPECT_EQ(error_of(a + "[[sources]]\ndata = \"b\"\nwieght = 2\n"),
            "run.toml:5: sources[1]: unknown key 'wieght' (a source takes name, weight, data, "
            "list, manifest, manifest_format, path_column, label_column, classes, labels, shards, "
            "image_key, video_key, label_key; the job's other keys go outside [[sources]]) [key "
            "sources[1].wieght]");
  EXPECT_NE(error_of(a + "[[sources]]\ndata = \"b\"\nbatch_size = 2\n")
                .find("run.toml:5: sources[1]: unknown key 'batch_size'"),
            std::string::npos);
  EXPECT_EQ(error_of("[[sources]]\ndata = \"a\"\nweight = -1\n"),
            "run.toml:3: sources[0].weight: expected a finite number > 0, got -1 [key "
            "sources[0].weight]");
  EXPECT_EQ(error_of("[[sources]]\ndata = \"a\"\nweight = 0\n"),
            "run.toml:3: sources[0].weight: expected a finite number > 0, got 0 [key "
            "sources[0].weight]");
  EXPECT_NE(error_of("[[sources]]\ndata = \"a\"\nweight = nan\n").find("sources[0].weight"),
            std::string::npos);
  EXPECT_NE(error_of("[[sources]]\ndata = \"a\"\nweight = inf\n").find("sources[0].weight"),
            std::string::npos);
  EXPECT_EQ(error_of(a + "[[sources]]\nname = \"b\"\nweight = 2\n"),
            "run.toml:3: sources[1]: no data: give data, list, manifest or shards [key "
            "sources[1].data]");
  EXPECT_EQ(error_of("data = \"x\"\n" + a),
            "sources and data: a mix takes its samples from each [[sources]] table's own data; "
            "give one or the other [key sources]");
  EXPECT_EQ(error_of(a + "[[sources]]\ndata = \"b\"\nlist = \"c\"\n"),
            "sources[1].data and sources[1].list: give one of them, not both [key "
            "sources[1].list]");
  EXPECT_NE(error_of("[[sources]]\nname = \"x\"\ndata = \"a\"\n[[sources]]\nname = \"x\"\ndata = "
                     "\"b\"\n")
                .find("sources[1].name: 'x' is also sources[0]'s name [key sources[1].name]"),
            std::string::npos);
  EXPECT_EQ(error_of("sources = 3\n"),
            "run.toml:1: sources: expected tables ([[sources]] with data = ... and weight = ...), "
            "got 3 [key sources]");
  EXPECT_EQ(error_of("epoch_samples = 10\ndata = \"a\"\n"),
            "epoch_samples: sets the draws of a mix's epoch; it needs [[sources]] [key "
            "epoch_samples]");
  // Relative paths resolve against the file's folder, as the job's own keys do.
  RunConfig c;
  apply_toml(c, "[[sources]]\ndata = \"imgs\"\nweight = 2.5\n", "/cfg/run.toml");
  ASSERT_EQ(c.sources.size(), 1u);
  EXPECT_EQ(c.sources[0].listing.data, "/cfg/imgs");
  EXPECT_EQ(c.sources[0].weight, 2.5);
  EXPECT_EQ(c.sources[0].name, "source0");
}

TEST_F(MixedJob, ASourceThatCannotBeListedIsNamed) {
  RunConfig c;
  apply_toml(c,
             "[[sources]]\ndata = \"" + (root_ / "a").string() +
                 "\"\nlabels = \"folder\"\n[[sources]]\nname = \"gone\"\ndata = \"" +
                 (root_ / "missing").string() + "\"\n",
             "run.toml");
  resolve(c, kNoEnv);
  try {
    open_dataset(c, false);
    FAIL() << "a missing folder was listed";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("sources[1] (gone): ", 0), 0u) << e.what();
    EXPECT_EQ(e.key().rfind("sources[1]", 0), 0u) << e.key();
  }
  // Labelled and unlabelled sources do not mix.
  RunConfig unlabelled = c;
  unlabelled.sources[1].listing.data = (root_ / "b").string();
  try {
    open_dataset(unlabelled, false);
    FAIL() << "a labelled and an unlabelled source were mixed";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "sources: source 1 (gone): has no labels, where source 0 has");
  }
}

}  // namespace
}  // namespace brigade::launch::mix_test
