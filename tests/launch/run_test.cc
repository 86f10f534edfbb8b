// End to end: the real `brigade` binary on a small generated dataset with corrupt
// files mixed in.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "actors/stats.h"
#include "media/synthetic.h"

namespace brigade::launch::run_test {  // its own: the tests of one target share a unity batch
namespace {

namespace fs = std::filesystem;

constexpr int kFiles = 63;
const std::set<std::uint64_t> kCorrupt{7, 30, 51};  // truncated, garbage, empty

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Whether `dir` holds a checkpoint file of `rank_of` ("rank-0-of-1.ckpt"), of any
// generation, job and run (transport/checkpoint/checkpoint.h FILES).
bool has_checkpoint(const fs::path& dir, const std::string& rank_of) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const auto name = e.path().filename().string();
    if (name.rfind("gen-", 0) == 0 && name.ends_with("." + rank_of)) return true;
  }
  return false;
}

std::vector<std::uint64_t> read_ids(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::uint64_t> ids;
  for (std::uint64_t id; in >> id;) ids.push_back(id);
  return ids;
}

class RunTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::mt19937_64 rng(std::random_device{}());
    root_ = fs::temp_directory_path() / ("brigade-run-" + std::to_string(rng()));
    fs::create_directories(root_ / "data" / "sub");
    for (int i = 0; i < kFiles; ++i) {
      // Some in a subfolder: the listing is recursive and sorted by path.
      const auto path = root_ / "data" / (i >= 40 ? "sub" : "") / name(i);
      auto bytes =
          media::make_image(media::ImageCodec::jpeg, 96 + 2 * i, 80, static_cast<std::uint64_t>(i));
      if (i == 7) bytes.resize(bytes.size() / 2);
      if (i == 30)
        for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
      if (i == 51) bytes.clear();
      std::ofstream(path, std::ios::binary)
          .write(reinterpret_cast<const char*>(bytes.data()),
                 static_cast<std::streamsize>(bytes.size()));
      paths_.push_back(path);
    }
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  // Files under sub/ sort after the others, so sample i is file i.
  static std::string name(int i) {
    return "img-" + std::string(i < 10 ? "00" : "0") + std::to_string(i) + ".jpg";
  }

  void SetUp() override {
    dir_ = root_ / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(dir_);
  }

  Result run(const std::string& args, const std::string& prefix = "") {
    const auto out = dir_ / "stdout", err = dir_ / "stderr";
    const std::string cmd = prefix + "'" BRIGADE_BINARY "' run " + args +
                            " --no-progress --threads 2 > '" + out.string() + "' 2> '" +
                            err.string() + "'";
    const int status = std::system(cmd.c_str());
    Result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }
  std::string data() const { return "--data '" + (root_ / "data").string() + "'"; }
  std::string ids(const std::string& file) const {
    return " --ids-out '" + (dir_ / file).string() + "'";
  }

  std::set<std::uint64_t> good() const {
    std::set<std::uint64_t> g;
    for (std::uint64_t i = 0; i < kFiles; ++i)
      if (!kCorrupt.count(i)) g.insert(i);
    return g;
  }

  static inline fs::path root_;
  static inline std::vector<fs::path> paths_;
  fs::path dir_;
};

TEST_F(RunTest, DeliversEveryGoodSampleOnceAndReportsCorruptOnes) {
  const auto r = run(data() + ids("ids") + " --batch-size 8 --seed 3 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto delivered = read_ids(dir_ / "ids");
  EXPECT_EQ(delivered.size(), good().size());
  EXPECT_EQ(std::set<std::uint64_t>(delivered.begin(), delivered.end()), good());
  std::vector<std::uint64_t> sorted(delivered);
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(sorted, delivered) << "shuffled by default";
  for (auto id : kCorrupt) {
    const std::string needle = "sample " + std::to_string(id) + " (" + paths_[id].string() + "): ";
    EXPECT_NE(r.err.find(needle), std::string::npos) << needle << "\n" << r.err;
  }
  EXPECT_NE(r.err.find("[bad_data]"), std::string::npos) << r.err;
  // stdout holds exactly the JSON line.
  ASSERT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["samples"], 60);
  EXPECT_EQ(json["batches"], 8);
  EXPECT_EQ(json["failed"], 3);
  EXPECT_EQ(json["filtered"], 0);
  for (const char* key :
       {"seconds", "samples_per_s", "time_to_first_batch_s", "cpu_seconds", "peak_rss_mb"}) {
    EXPECT_TRUE(json[key].is_number()) << key;
  }
  std::vector<std::string> stages;
  std::vector<std::string> described;  // every figure of actors/stats.h, in its order
  for (const auto& f : actors::stage_figures()) described.emplace_back(f.key);
  for (const auto& s : json["stages"]) {
    stages.push_back(s["name"]);
    EXPECT_EQ(s["failures"], s["name"] == "decode" ? 3 : 0) << s["name"];
    std::vector<std::string> keys;
    for (const auto& [key, value] : s.items()) keys.push_back(key);
    std::sort(described.begin(), described.end());  // nlohmann's objects sort their keys
    EXPECT_EQ(keys, described) << s["name"];
  }
  EXPECT_EQ(stages, (std::vector<std::string>{"read", "batch", "decode"}));
  EXPECT_EQ(json["sink"]["delivered"], 8);
  EXPECT_TRUE(json["sink"]["data_readiness"].is_number());
}

TEST_F(RunTest, SameSeedSameOrderAndNoShuffleIsSorted) {
  ASSERT_EQ(run(data() + ids("a") + " --seed 9").code, 0);
  const auto completion =
      run(data() + ids("b") + " --seed 9 --order completion --batch-size 5 --json");
  ASSERT_EQ(completion.code, 0) << completion.err;
  const auto json = nlohmann::json::parse(completion.out);
  EXPECT_EQ(json["failed"], 3);
  EXPECT_EQ(json["stages"][2]["name"], "decode");
  EXPECT_EQ(json["stages"][2]["failures"], 3);
  ASSERT_EQ(run(data() + ids("c") + " --no-shuffle").code, 0);
  ASSERT_EQ(run(data() + ids("a2") + " --seed 9").code, 0);
  const auto a = read_ids(dir_ / "a"), b = read_ids(dir_ / "b"), c = read_ids(dir_ / "c");
  EXPECT_EQ(std::set<std::uint64_t>(b.begin(), b.end()), good());
  EXPECT_EQ(a.size(), 60u);
  const auto expected = good();
  const std::vector<std::uint64_t> sorted(expected.begin(), expected.end());
  EXPECT_EQ(c, sorted);
  EXPECT_EQ(a, read_ids(dir_ / "a2"));
}

TEST_F(RunTest, RanksSplitTheDataset) {
  ASSERT_EQ(run(data() + ids("r0") + " --rank 0 --world-size 2 --tail none").code, 0);
  ASSERT_EQ(run(data() + ids("r1") + " --tail none", "RANK=1 WORLD_SIZE=2 ").code, 0);
  auto r0 = read_ids(dir_ / "r0"), r1 = read_ids(dir_ / "r1");
  std::set<std::uint64_t> all(r0.begin(), r0.end());
  for (auto id : r1) EXPECT_TRUE(all.insert(id).second) << id << " on both ranks";
  EXPECT_EQ(all, good());
}

TEST_F(RunTest, FailureBudgetExceededExitsOne) {
  const auto r = run(data() + " --no-shuffle --max-failures 1");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("sample 7 ("), std::string::npos) << r.err;
}

TEST_F(RunTest, ListFileIdsAndRelativePaths) {
  std::ofstream list(dir_ / "list.txt");
  list << "\n"
       << fs::relative(paths_[3], dir_).string() << "\n  \n"
       << paths_[5].string() << "\n"
       << fs::relative(paths_[7], dir_).string() << "\n";
  list.close();
  const auto r =
      run("--list '" + (dir_ / "list.txt").string() + "'" + ids("ids") + " --no-shuffle --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read_ids(dir_ / "ids"), (std::vector<std::uint64_t>{0, 1}));
  EXPECT_NE(r.err.find("sample 2 (" + (dir_ / fs::relative(paths_[7], dir_)).string()),
            std::string::npos)
      << r.err;
}

TEST_F(RunTest, ConfigFileAndErrorsExitTwo) {
  std::ofstream(dir_ / "good.toml") << "data = \"" << (root_ / "data").string()
                                    << "\"\nbatch_size = 100\n[stages.decode]\nconcurrency = 1\n";
  auto ok = run("'" + (dir_ / "good.toml").string() + "' --batch-size 7 --json");
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(nlohmann::json::parse(ok.out)["batches"], 9);  // the flag wins: ceil(60 / 7)

  std::ofstream(dir_ / "bad.toml") << "batch_size = 4\n[stages.decode]\nconcurency = 2\n";
  auto bad = run("'" + (dir_ / "bad.toml").string() + "'");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("bad.toml:3: unknown key 'stages.decode.concurency'"), std::string::npos)
      << bad.err;
  EXPECT_TRUE(bad.out.empty());

  auto rank = run(data() + " --rank 2 --world-size 2");
  EXPECT_EQ(rank.code, 2);
  EXPECT_NE(rank.err.find("rank 2 (from --rank) must be less than the world size 2"),
            std::string::npos)
      << rank.err;

  auto empty = run("--data '" + dir_.string() + "'");
  EXPECT_EQ(empty.code, 2);
  EXPECT_NE(empty.err.find("no image files"), std::string::npos) << empty.err;

  auto nothing = run(data() + " --resume-from '" + (dir_ / "no-checkpoints").string() + "'");
  EXPECT_EQ(nothing.code, 2) << nothing.err;
  EXPECT_NE(nothing.err.find("no-checkpoints"), std::string::npos) << nothing.err;

  EXPECT_EQ(run(data() + " --batch-size zero").code, 2);
  EXPECT_EQ(run(data() + " --frobnicate").code, 2);
}

TEST_F(RunTest, StopAndResumeDeliverTheUninterruptedSequence) {
  const std::string common = data() + " --seed 11 --batch-size 4 --epochs 2";
  ASSERT_EQ(run(common + ids("full")).code, 0);
  const auto ckpt = " --checkpoint-dir '" + (dir_ / "ckpt").string() + "'";
  const auto from = " --resume-from '" + (dir_ / "ckpt").string() + "'";
  auto first = run(common + ids("part1") + ckpt + " --stop-after-batches 20");
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_TRUE(has_checkpoint(dir_ / "ckpt", "rank-0-of-1.ckpt"));
  auto second = run(common + ids("part2") + ckpt + from);
  ASSERT_EQ(second.code, 0) << second.err;
  auto joined = read_ids(dir_ / "part1");
  EXPECT_GT(joined.size(), 60u);  // into epoch 2 (batches that lost a corrupt file are short)
  EXPECT_LT(joined.size(), 80u);
  const auto part2 = read_ids(dir_ / "part2");
  joined.insert(joined.end(), part2.begin(), part2.end());
  EXPECT_EQ(joined, read_ids(dir_ / "full"));

  auto again = run(common + ids("part3") + from + " --json");
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_TRUE(read_ids(dir_ / "part3").empty());
  EXPECT_NE(again.err.find("nothing to deliver"), std::string::npos) << again.err;

  auto conflict = run(data() + " --seed 12 --batch-size 4 --epochs 2" + from);
  EXPECT_EQ(conflict.code, 2);
  EXPECT_NE(conflict.err.find("seed"), std::string::npos) << conflict.err;
}

TEST_F(RunTest, TwoRanksStopAndOneRankFinishesTheEpoch) {
  const std::string common = data() + " --seed 4 --batch-size 4 --tail none --checkpoint-dir '" +
                             (dir_ / "ckpt").string() + "'";
  ASSERT_EQ(run(common + ids("r0") + " --rank 0 --world-size 2 --stop-after-batches 3").code, 0);
  ASSERT_EQ(run(common + ids("r1") + " --rank 1 --world-size 2 --stop-after-batches 5").code, 0);
  const auto resumed =
      run(common + ids("rest") + " --resume-from '" + (dir_ / "ckpt").string() + "'");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  std::multiset<std::uint64_t> all;
  for (const char* f : {"r0", "r1", "rest"}) {
    for (auto id : read_ids(dir_ / f)) all.insert(id);
  }
  EXPECT_EQ(std::set<std::uint64_t>(all.begin(), all.end()), good());
  EXPECT_EQ(all.size(), good().size()) << "a sample delivered twice";
}

TEST_F(RunTest, SigtermFlushesIdsWritesCheckpointAndExits143) {
  const auto ckpt = " --checkpoint-dir '" + (dir_ / "ckpt").string() + "'";
  // Many epochs keep it running; SIGTERM once it has logged its start and run a while.
  const auto err = (dir_ / "stderr").string();
  const std::string cmd = "'" BRIGADE_BINARY "' run " + data() + ids("ids") + ckpt +
                          " --epochs 100000 --no-progress --threads 2 > /dev/null 2> '" + err +
                          "' & pid=$!; for i in $(seq 400); do grep -q 'images, rank' '" + err +
                          "' && break; sleep 0.05; done; sleep 0.5; kill -TERM $pid; wait $pid";
  const int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = slurp(err);
  EXPECT_EQ(r.code, 143) << r.err;
  EXPECT_TRUE(has_checkpoint(dir_ / "ckpt", "rank-0-of-1.ckpt")) << r.err;
  const auto text = slurp(dir_ / "ids");
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
}

TEST_F(RunTest, VideoClipsInNchwWithACorruptOne) {
  fs::create_directories(dir_ / "clips");
  for (int i = 0; i < 3; ++i) {
    media::VideoSpec spec{
        .width = 64, .height = 48, .frames = 12, .seed = static_cast<std::uint64_t>(i)};
    media::write_file((dir_ / "clips" / ("clip-" + std::to_string(i) + ".mp4")).string(),
                      media::make_video(spec));
  }
  media::write_file((dir_ / "clips" / "clip-3.mp4").string(), std::vector<std::uint8_t>(100, 7));
  const auto r = run("--kind video --layout nchw --batch-size 2 --json --data '" +
                     (dir_ / "clips").string() + "'" + ids("ids"));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["samples"], 3);
  EXPECT_EQ(json["failed"], 1);
  EXPECT_NE(r.err.find("sample 3 ("), std::string::npos) << r.err;
  const auto delivered = read_ids(dir_ / "ids");
  EXPECT_EQ(std::set<std::uint64_t>(delivered.begin(), delivered.end()),
            (std::set<std::uint64_t>{0, 1, 2}));
}

// -- Hardening: samples never lost or miscounted at the edges -----------------------

TEST_F(RunTest, HugeBatchSizesAllocateOnlyWhatTheDataNeeds) {
  const auto r = run(data() + " --batch-size 200000 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["samples"], 60);
  EXPECT_EQ(json["failed"], 3);  // the three corrupt files, nothing else
  EXPECT_EQ(json["batches"], 1);
  const auto absurd = run(data() + " --batch-size 100000000");
  EXPECT_EQ(absurd.code, 2);
  EXPECT_NE(absurd.err.find("up to 1048576"), std::string::npos) << absurd.err;
}

TEST_F(RunTest, ConcurrencyAboveTheLimitIsRejected) {
  for (const char* flag : {"--read-concurrency", "--decode-concurrency"}) {
    const auto r = run(data() + " " + flag + " 2147483647");
    EXPECT_EQ(r.code, 2) << flag;
    EXPECT_NE(r.err.find("up to 1024"), std::string::npos) << r.err;
  }
}

// Rebalancing acts on rank 0's statistics through its directory: without either it
// would do nothing, so it is refused rather than ignored.
TEST_F(RunTest, RebalanceWithoutStatisticsOrADirectoryIsRejected) {
  const auto token = dir_ / "token";
  std::ofstream(token) << "a-job-token-of-this-test\n";
  fs::permissions(token, fs::perms::owner_read | fs::perms::owner_write);
  for (const std::string extra : {"--directory 127.0.0.1:1", "--stats 127.0.0.1:1"}) {
    const auto r = run(data() + " --rebalance --token-file '" + token.string() + "' " + extra);
    EXPECT_EQ(r.code, 2) << extra;
    EXPECT_NE(r.err.find("--rebalance: rank 0 weighs the ranks"), std::string::npos) << r.err;
  }
}

// One rule in both orders: the budget holds over the whole job, not per epoch.
TEST_F(RunTest, FailureBudgetHoldsOverTheJobInBothOrders) {
  std::ofstream list(dir_ / "list.txt");
  for (int i : {0, 1, 7, 2, 30, 3}) list << paths_[i].string() << "\n";  // 2 corrupt of 6
  list.close();
  for (const char* order : {"input", "completion"}) {
    const auto r = run("--list '" + (dir_ / "list.txt").string() + "' --epochs 3 --order " + order +
                       " --max-failures 2 --json");
    EXPECT_EQ(r.code, 1) << order << "\n" << r.err;
    const auto json = nlohmann::json::parse(r.out);  // the summary is written on failure too
    EXPECT_EQ(json["end"], "failed");
    EXPECT_NE(json["failure"].get<std::string>().find("failure budget"), std::string::npos);
    EXPECT_LE(json["failed"].get<int>(), 3) << order;
  }
}

// A rate applies from the first sample: 20 empty files with 0% fail the job.
TEST_F(RunTest, RateBudgetIsEnforcedOnSmallJobs) {
  fs::create_directories(dir_ / "empty");
  for (int i = 0; i < 20; ++i) std::ofstream(dir_ / "empty" / (std::to_string(i) + ".jpg"));
  const auto zero = run("--data '" + (dir_ / "empty").string() + "' --max-failures 0%");
  EXPECT_EQ(zero.code, 1) << zero.err;
  // 3 corrupt of 63 files is 4.8%: within 5%, beyond 4%.
  EXPECT_EQ(run(data() + " --max-failures 5%").code, 0);
  EXPECT_EQ(run(data() + " --max-failures 4%").code, 1);
}

TEST_F(RunTest, NonRegularFilesFailAsSamplesWithTheirCause) {
  const auto fifo = dir_ / "fifo.jpg";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  fs::create_directories(dir_ / "folder.jpg");
  std::ofstream list(dir_ / "list.txt");
  list << paths_[0].string() << "\n"
       << fifo.string() << "\n"
       << (dir_ / "folder.jpg").string() << "\n"
       << "/dev/zero\n"
       << paths_[1].string() << "\n";
  list.close();
  const auto r =
      run("--list '" + (dir_ / "list.txt").string() + "' --no-shuffle --json" + ids("ids"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read_ids(dir_ / "ids"), (std::vector<std::uint64_t>{0, 4}));
  EXPECT_EQ(nlohmann::json::parse(r.out)["failed"], 3);
  for (const char* cause : {"not a regular file: a FIFO", "not a regular file: a directory",
                            "not a regular file: a character device"}) {
    EXPECT_NE(r.err.find(cause), std::string::npos) << cause << "\n" << r.err;
  }
}

TEST_F(RunTest, SymlinkLoopsAndDanglingLinksAreFailedSamples) {
  fs::create_directories(dir_ / "links");
  fs::copy_file(paths_[0], dir_ / "links" / "a.jpg");
  fs::create_symlink(dir_ / "links" / "loop2.jpg", dir_ / "links" / "loop1.jpg");
  fs::create_symlink(dir_ / "links" / "loop1.jpg", dir_ / "links" / "loop2.jpg");
  fs::create_symlink(dir_ / "links" / "missing.jpg", dir_ / "links" / "dangling.jpg");
  const auto r = run("--data '" + (dir_ / "links").string() + "' --no-shuffle --json" + ids("ids"));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["samples"], 1);
  EXPECT_EQ(json["failed"], 3);  // dangling, loop1, loop2
  EXPECT_NE(r.err.find("dangling symbolic link"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Too many levels of symbolic links"), std::string::npos) << r.err;
}

// --labels folder: the classes on the info line, each batch's labels in the digests and
// the samples delivered per class in the JSON summary (a failed one not counted).
TEST_F(RunTest, ClassFoldersPrintTheirClassesDigestLabelsAndCountSamplesPerClass) {
  const auto data = dir_ / "classes";
  const std::vector<std::pair<std::string, std::vector<int>>> classes{
      {"ant", {0, 1, 2, 3, 4}}, {"bee", {5, 7}}, {"cow", {6}}};  // paths_[7] is corrupt
  for (const auto& [name, files] : classes) {
    fs::create_directories(data / name);
    for (int i : files) fs::copy_file(paths_[i], data / name / paths_[i].filename());
  }
  const auto digests = dir_ / "digests";
  const auto r = run("--data '" + data.string() +
                     "' --labels folder --no-shuffle --batch-size 3 --json --digests-out '" +
                     digests.string() + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("8 images, 3 classes (ant, bee, cow)"), std::string::npos) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["failed"], 1);
  EXPECT_EQ(json["classes"], (nlohmann::json{{"ant", 5}, {"bee", 1}, {"cow", 1}}));
  EXPECT_NE(r.err.find("samples per class: ant 5, bee 1, cow 1"), std::string::npos) << r.err;
  // Ids 0-4 ant, 5 bee, 6 bee (the corrupt one), 7 cow; in order.
  EXPECT_EQ(slurp(digests).substr(0, 2), "0 ");
  std::istringstream lines(slurp(digests));
  std::vector<std::string> labelled;
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.find(" labels");
    ASSERT_NE(at, std::string::npos) << line;
    std::istringstream words(line.substr(0, at));
    std::string epoch, hash, id;
    words >> epoch >> hash;
    std::string text;
    while (words >> id) text += id + " ";
    labelled.push_back(text + "|" + line.substr(at + 7));
  }
  EXPECT_EQ(labelled, (std::vector<std::string>{"0 1 2 | 0 0 0", "3 4 5 | 0 0 1", "7 | 2"}));
  // The same folder unlabelled: no classes, no labels.
  const auto plain = run("--data '" + data.string() + "' --no-shuffle --json --digests-out '" +
                         digests.string() + "'");
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_FALSE(nlohmann::json::parse(plain.out).contains("classes"));
  EXPECT_EQ(slurp(digests).find("labels"), std::string::npos);
}

// [[sources]]: the mix on the info line, the samples per source and per "source/class"
// in the JSON summary and on the log, each batch's sources in the digests.
TEST_F(RunTest, AMixOfSourcesCountsSamplesPerSourceAndDigestsThem) {
  const auto a = dir_ / "mix-a", b = dir_ / "mix-b";
  for (int i : {0, 1, 2, 3}) {
    fs::create_directories(a / (i < 2 ? "ant" : "bee"));
    fs::copy_file(paths_[i], a / (i < 2 ? "ant" : "bee") / paths_[i].filename());
  }
  for (int i : {4, 5}) {
    fs::create_directories(b / "cow");
    fs::copy_file(paths_[i], b / "cow" / paths_[i].filename());
  }
  const auto config = dir_ / "mix.toml";
  std::ofstream(config) << "batch_size = 2\nseed = 1\n[[sources]]\nname = \"first\"\ndata = \""
                        << a.string() << "\"\nlabels = \"folder\"\nweight = 2\n"
                        << "[[sources]]\nname = \"second\"\ndata = \"" << b.string()
                        << "\"\nlabels = \"folder\"\n";
  const auto digests = dir_ / "mix-digests";
  const auto r = run("'" + config.string() + "' --json --digests-out '" + digests.string() + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("6 images, a mix of 2 sources (first × 2, second × 1)"), std::string::npos)
      << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["samples"], 6);
  const auto& sources = json["sources"];
  EXPECT_EQ(sources["first"].get<int>() + sources["second"].get<int>(), 6) << sources;
  const auto& classes = json["classes"];
  EXPECT_EQ(classes["first/ant"].get<int>() + classes["first/bee"].get<int>(),
            sources["first"].get<int>())
      << classes;
  EXPECT_EQ(classes["second/cow"], sources["second"]) << classes;
  EXPECT_NE(r.err.find("samples per source: first "), std::string::npos) << r.err;
  std::istringstream lines(slurp(digests));
  int counted = 0;
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.find(" sources ");
    ASSERT_NE(at, std::string::npos) << line;
    std::istringstream words(line.substr(at + 9));
    for (int s; words >> s; ++counted) EXPECT_TRUE(s == 0 || s == 1) << line;
  }
  EXPECT_EQ(counted, 6);
}

// With stdout or stderr closed, the ids file must not take descriptor 1 or 2.
TEST_F(RunTest, ClosedStandardDescriptorsDoNotCaptureTheIdsFile) {
  for (const char* closed : {">&-", "2>&-"}) {
    const auto file = dir_ / "ids";
    const std::string cmd = "'" BRIGADE_BINARY "' run " + data() + ids("ids") +
                            " --no-progress --threads 2 --json " + closed +
                            (std::string(closed) == ">&-" ? " 2>/dev/null" : " >/dev/null");
    ASSERT_EQ(std::system(cmd.c_str()), 0) << closed;
    const auto text = slurp(file);
    EXPECT_EQ(text.find('{'), std::string::npos) << closed << ": the JSON went into the ids file";
    EXPECT_EQ(text.find("brigade"), std::string::npos) << closed << ": logs went into it";
    EXPECT_EQ(read_ids(file).size(), 60u) << closed;
  }
}

TEST_F(RunTest, UnwritableCheckpointDirIsRejectedBeforeTheRun) {
  const auto blocker = dir_ / "a-file";
  std::ofstream(blocker) << "x";
  const auto r =
      run(data() + ids("ids") + " --checkpoint-dir '" + (blocker / "ckpt").string() + "'");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("checkpoint_dir"), std::string::npos) << r.err;
  EXPECT_TRUE(read_ids(dir_ / "ids").empty()) << "nothing runs before the check";
}

// Stopping on the failure budget writes a checkpoint: once the data is fixed, the job
// resumes where it stopped and delivers exactly the rest.
TEST_F(RunTest, FailureBudgetStopWritesAResumableCheckpoint) {
  const std::string common =
      data() + " --no-shuffle --batch-size 4 --checkpoint-dir '" + (dir_ / "ckpt").string() + "'";
  const auto failed = run(common + ids("part1") + " --max-failures 0 --json");
  ASSERT_EQ(failed.code, 1) << failed.err;
  const auto json = nlohmann::json::parse(failed.out);
  EXPECT_EQ(json["end"], "failed");
  ASSERT_TRUE(json.contains("checkpoint")) << failed.out;
  const auto resumed =
      run(common + ids("part2") + " --resume-from '" + (dir_ / "ckpt").string() + "'");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  auto all = read_ids(dir_ / "part1");
  const auto rest = read_ids(dir_ / "part2");
  all.insert(all.end(), rest.begin(), rest.end());
  const auto g = good();
  EXPECT_EQ(all, std::vector<std::uint64_t>(g.begin(), g.end()));
}

// The run's clock starts with the program, not with a wrapper that execs it.
TEST_F(RunTest, FiguresStartAtTheProgramsOwnStart) {
  const auto r = run(data() + " --json", "sleep 3; exec ");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_LT(json["time_to_first_batch_s"].get<double>(), 3.0);
  EXPECT_LT(json["seconds"].get<double>(), 3.0 + json["samples"].get<double>());
  EXPECT_TRUE(json["startup_s"].is_number());
}

// A read that never returns (a hung network file system, here a FUSE file system whose
// reads never answer) must not keep SIGTERM from flushing the ids and writing the
// checkpoint of what was delivered: one signal ends the run.
TEST_F(RunTest, SigtermWhileAReadIsBlockedStillSavesEverything) {
#ifndef BRIGADE_HUNG_FS
  GTEST_SKIP() << "built without libfuse3 (no hung_fs helper)";
#else
  const auto mnt = dir_ / "mnt";
  fs::create_directories(mnt);
  const auto pid_file = dir_ / "fs.pid";
  const auto marker = dir_ / "read-started";
  ASSERT_EQ(std::system(("'" BRIGADE_HUNG_FS "' '" + mnt.string() + "' '" + marker.string() +
                         "' > /dev/null 2>&1 & echo $! > '" + pid_file.string() + "'")
                            .c_str()),
            0);
  struct Unmount {
    fs::path mnt, pid;
    ~Unmount() {
      (void)std::system(("kill -9 $(cat '" + pid.string() + "') 2>/dev/null; umount -l '" +
                         mnt.string() + "' 2>/dev/null")
                            .c_str());
    }
  } unmount{mnt, pid_file};
  for (int i = 0; i < 100 && !fs::exists(mnt / "hung.jpg"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!fs::exists(mnt / "hung.jpg")) GTEST_SKIP() << "cannot mount a FUSE file system here";
  std::ofstream list(dir_ / "list.txt");
  list << paths_[0].string() << "\n"
       << paths_[1].string() << "\n"
       << (mnt / "hung.jpg").string() << "\n"
       << paths_[2].string() << "\n";
  list.close();
  const auto err = (dir_ / "stderr").string();
  const auto ids_file = (dir_ / "ids").string();
  const std::string cmd =
      "'" BRIGADE_BINARY "' run --list '" + (dir_ / "list.txt").string() +
      "' --no-shuffle --batch-size 1 --read-concurrency 1 --no-progress --threads 2 "
      "--checkpoint-dir '" +
      (dir_ / "ckpt").string() + "' --ids-out '" + ids_file + "' > /dev/null 2> '" + err +
      "' & pid=$!; for i in $(seq 400); do [ -e '" + marker.string() +
      "' ] && break; sleep 0.05; done; sleep 0.5; "
      "start=$(date +%s%N); kill -TERM $pid; wait $pid; rc=$?; echo $(( ($(date +%s%N) - "
      "start) / 1000000 )) > '" +
      (dir_ / "ms").string() + "'; exit $rc";
  const int status = std::system(cmd.c_str());
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  EXPECT_EQ(code, 143) << slurp(err);
  EXPECT_EQ(read_ids(ids_file), (std::vector<std::uint64_t>{0, 1}));
  EXPECT_TRUE(has_checkpoint(dir_ / "ckpt", "rank-0-of-1.ckpt")) << slurp(err);
  EXPECT_LT(std::stoi(slurp(dir_ / "ms")), 10000) << "one SIGTERM ends the run";
#endif
}

// -- Hardening: checkpoint sets that can always be resumed ---------------------------

// Ranks stop near an epoch boundary, in different epochs: the set still resumes, at
// another world size, delivering exactly the rest of both epochs.
TEST_F(RunTest, RanksStoppedInDifferentEpochsResumeElastically) {
  const std::string common = data() +
                             " --seed 5 --batch-size 5 --epochs 2 --tail none --checkpoint-dir '" +
                             (dir_ / "ckpt").string() + "'";
  // 60 good samples + 3 corrupt over 2 ranks: 32 and 31 per rank, 7 batches of 5 per epoch.
  ASSERT_EQ(run(common + ids("r0") + " --rank 0 --world-size 2 --stop-after-batches 7").code, 0);
  ASSERT_EQ(run(common + ids("r1") + " --rank 1 --world-size 2 --stop-after-batches 8").code, 0);
  std::multiset<std::uint64_t> all;
  for (const char* f : {"r0", "r1"}) {
    for (auto id : read_ids(dir_ / f)) all.insert(id);
  }
  const auto from = " --resume-from '" + (dir_ / "ckpt").string() + "'";
  for (std::uint32_t r = 0; r < 3; ++r) {
    const auto res = run(common + ids("n" + std::to_string(r)) + from + " --rank " +
                         std::to_string(r) + " --world-size 3");
    ASSERT_EQ(res.code, 0) << res.err;
    for (auto id : read_ids(dir_ / ("n" + std::to_string(r)))) all.insert(id);
  }
  for (auto id : good()) EXPECT_EQ(all.count(id), 2u) << "sample " << id << " over two epochs";
  EXPECT_EQ(all.size(), 2 * good().size());
}

// A resume into the same folder that crashes mid-save (one rank of two saves) leaves
// the previous complete set: the job still resumes from it, at any world size.
TEST_F(RunTest, AnIncompleteNewerSetLeavesTheOlderOneResumable) {
  const std::string common = data() + " --seed 8 --batch-size 4 --tail none --checkpoint-dir '" +
                             (dir_ / "ckpt").string() + "'";
  ASSERT_EQ(run(common + ids("a0") + " --rank 0 --world-size 2 --stop-after-batches 2").code, 0);
  ASSERT_EQ(run(common + ids("a1") + " --rank 1 --world-size 2 --stop-after-batches 2").code, 0);
  const auto from = " --resume-from '" + (dir_ / "ckpt").string() + "'";
  // Only rank 0 of the resumed run saves (rank 1 "crashed"): generation 2 is incomplete.
  ASSERT_EQ(run(common + ids("b0") + from + " --rank 0 --world-size 2 --stop-after-batches 1").code,
            0);
  const auto rest = run(common + ids("c") + from + " --world-size 1");
  ASSERT_EQ(rest.code, 0) << rest.err;
  std::multiset<std::uint64_t> all;
  for (const char* f : {"a0", "a1", "c"}) {
    for (auto id : read_ids(dir_ / f)) all.insert(id);
  }
  EXPECT_EQ(all.size(), good().size()) << "resumed from generation 1: b0's batch again";
  EXPECT_EQ(std::set<std::uint64_t>(all.begin(), all.end()), good());
}

// A fresh run never writes into a folder holding another run's checkpoints (it would
// mix sets, and a later resume could take the older job's newer generation).
TEST_F(RunTest, AFreshRunRefusesAFolderOfAnotherRun) {
  const auto ckpt = " --checkpoint-dir '" + (dir_ / "ckpt").string() + "'";
  ASSERT_EQ(run(data() + ckpt + " --seed 1 --stop-after-batches 1").code, 0);
  const auto again = run(data() + ckpt + " --seed 1 --world-size 2 --rank 0");
  EXPECT_EQ(again.code, 2) << again.err;
  EXPECT_NE(again.err.find("--resume-from"), std::string::npos) << again.err;
  const auto other = run(data() + ckpt + " --seed 2");
  EXPECT_EQ(other.code, 2) << other.err;
}

// --stats-out: one JSON object per interval (launch/stats_output.h), whose deltas add up
// to what the run delivered, with the process's own analyzer figures.
TEST_F(RunTest, StatsOutWritesOneObjectPerInterval) {
  const auto file = dir_ / "stats.jsonl";
  const auto r =
      run(data() + " --epochs 3 --batch-size 8 --json --stats-interval 0.2 --stats-out '" +
          file.string() + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto summary = nlohmann::json::parse(r.out);
  std::istringstream lines(slurp(file));
  std::uint64_t samples = 0, sequence = 0, batches = 0;
  nlohmann::json last;
  for (std::string line; std::getline(lines, line);) {
    last = nlohmann::json::parse(line);
    EXPECT_EQ(last["sequence"], ++sequence);
    EXPECT_EQ(last["rank"], 0);
    samples += last["samples"].get<std::uint64_t>();
    batches += last["batches"].get<std::uint64_t>();
    ASSERT_EQ(last["stages"].size(), summary["stages"].size());
    for (std::size_t i = 0; i < last["stages"].size(); ++i)
      EXPECT_EQ(last["stages"][i]["name"], summary["stages"][i]["name"]);
    EXPECT_LE(last["exposed_wait_s"].get<double>(), last["interval_s"].get<double>());
    ASSERT_TRUE(last.contains("cluster"));
    EXPECT_TRUE(last["cluster"]["ranks"][0]["reported"].get<bool>());
  }
  ASSERT_GE(sequence, 1u);
  EXPECT_EQ(samples, 180u);
  EXPECT_EQ(last["totals"]["samples"], 180);
  EXPECT_EQ(batches, summary["batches"].get<std::uint64_t>());
  const auto tiny = run(data() + " --stats-interval 0.1 --stats-out '" + file.string() + "'");
  EXPECT_EQ(tiny.code, 2);
  EXPECT_NE(tiny.err.find("stats_interval: at least 0.2 seconds"), std::string::npos) << tiny.err;
}

}  // namespace
}  // namespace brigade::launch::run_test
