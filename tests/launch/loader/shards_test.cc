// WebDataset tar shards: the spec's brace ranges, the index (GNU tar's pax and GNU long
// names, offsets checked against the bytes), grouping into samples with labels and
// metadata, every bad input, the index cache, and batches byte-identical to loose files
// — decoded here, by the job, and on a remote worker.
#include "launch/loader/shards.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "actors/sampler.h"
#include "launch/loader/decode.h"
#include "launch/loader/job.h"
#include "launch/loader/job_settings.h"
#include "launch/loader/remote_ops.h"
#include "launch/loader/sources.h"
#include "media/source.h"
#include "media/synthetic.h"

namespace brigade::launch::shards_test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write(const fs::path& p, std::string_view bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
}

// GNU tar (an independent writer) makes `out` from `names` under `dir`, in that order.
void tar(const fs::path& out, const fs::path& dir, const std::vector<std::string>& names,
         const std::string& format = "gnu") {
  std::string cmd = "tar --format=" + format + " -cf '" + out.string() + "' -C '" + dir.string() +
                    "' --no-recursion";
  for (const auto& n : names) cmd += " '" + n + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

class Shards : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ =
        fs::temp_directory_path() / ("brigade-shards-" + std::to_string(std::random_device{}()));
    fs::create_directories(root_ / "src");
  }
  void TearDown() override { fs::remove_all(root_); }

  // A shard of samples key → {extension → bytes}, members in the order given.
  fs::path shard(const std::string& name,
                 const std::vector<std::pair<std::string, std::string>>& members,
                 const std::string& format = "gnu") {
    const auto src = root_ / ("src-" + name);
    std::vector<std::string> names;
    for (const auto& [member, bytes] : members) {
      write(src / member, bytes);
      names.push_back(member);
    }
    const auto out = root_ / name;
    tar(out, src, names, format);
    return out;
  }

  ShardOptions options() const { return {.cache_dir = (root_ / "cache").string()}; }

  fs::path root_;
};

std::string expect_shard_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const ShardError& e) {
    EXPECT_EQ(e.key(), "shards");
    return e.what();
  }
  ADD_FAILURE() << "no ShardError";
  return {};
}

TEST(ShardSpec, ExpandsRangesAndAlternativesInOrder) {
  const std::vector<std::string> spec{"a/train-{000008..000011}.tar", "b-{x,y}-{0..1}.tar"};
  EXPECT_EQ(expand_shard_spec(spec),
            (std::vector<std::string>{"a/train-000008.tar", "a/train-000009.tar",
                                      "a/train-000010.tar", "a/train-000011.tar", "b-x-0.tar",
                                      "b-x-1.tar", "b-y-0.tar", "b-y-1.tar"}));
  for (const std::string bad : {"a-{0..3.tar", "a-}.tar", "a-{3..1}.tar", "a-{x..3}.tar",
                                "a-{{0..1}}.tar", "a-{0..99999999}.tar"}) {
    const std::vector<std::string> one{bad};
    const auto what = expect_shard_error([&] { expand_shard_spec(one); });
    EXPECT_NE(what.find(bad), std::string::npos) << what;
  }
}

TEST_F(Shards, IndexesPaxAndGnuLongNamesAtTheirDataBytes) {
  const std::string deep(120, 'd');  // beyond ustar's 100-byte name field
  const std::string name = deep + "/" + std::string(150, 'k') + ".jpg";
  for (const std::string format : {"gnu", "pax", "ustar"}) {
    const std::vector<std::pair<std::string, std::string>> members{
        {"short.txt", "hello"},
        {format == "ustar" ? "u/x.jpg" : name, std::string(5000, 'j')},
        {"z.cls", "7\n"},
        {"empty.bin", ""}};
    const auto path = shard("index-" + format + ".tar", members, format);
    const auto index = index_shard(path.string());
    ASSERT_EQ(index.size(), members.size()) << format;
    const auto bytes = read_all(path);
    for (std::size_t i = 0; i < members.size(); ++i) {
      EXPECT_EQ(index[i].name, members[i].first) << format;
      ASSERT_EQ(index[i].size, members[i].second.size());
      // The offset libarchive reported is where the member's bytes are.
      EXPECT_EQ(bytes.substr(index[i].offset, index[i].size), members[i].second) << format;
      // And a ranged read returns exactly them.
      const auto read = media::read_file_range(path.string(), index[i].offset, index[i].size);
      EXPECT_EQ(std::string(read.begin(), read.end()), members[i].second);
    }
    EXPECT_EQ(index[2].inline_bytes, "7\n");  // .cls kept in the index
    EXPECT_TRUE(index[1].inline_bytes.empty());
  }
}

TEST_F(Shards, GroupsMembersByKeyWithLabelsAndMetadata) {
  const auto a = shard("a.tar", {{"x/000.jpg", "J0"},
                                 {"x/000.cls", "3"},
                                 {"x/000.json", R"({"label": 5, "w": 640, "who": "ann"})"},
                                 {"x/001.seg.png", "seg"},  // extension seg.png: not the image
                                 {"x/001.JPG", "J1"},       // extensions compare in lower case
                                 {"x/001.cls", "4"},
                                 {"x/001.json", R"({"label": 6})"},
                                 {"__index__", "shard metadata"}});
  const auto b = shard("b.tar", {{"002.jpg", "J2"}, {"002.cls", " 0\n"}});
  auto d = open_shards({a.string(), b.string()}, options());
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d.identity(0), "a.tar/x/000.jpg");
  EXPECT_EQ(d.identity(1), "a.tar/x/001.JPG");
  EXPECT_EQ(d.identity(2), "b.tar/002.jpg");
  ASSERT_TRUE(d.labelled());
  EXPECT_EQ(d.label(0), 3);
  EXPECT_EQ(d.label(1), 4);
  EXPECT_EQ(d.label(2), 0);
  const auto loc = d.location(1);
  EXPECT_EQ(loc.path, a.string());
  const auto bytes = media::read_file_range(loc.path, loc.offset, loc.size);
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), "J1");
  EXPECT_EQ(container_boundaries(d), (std::vector<std::uint64_t>{0, 2, 3}));

  // The label from a .json field, metadata columns from its fields.
  auto o = options();
  o.label_field = "label";
  o.meta_fields = {"w", "who"};
  d = open_shards({a.string()}, o);
  EXPECT_EQ(d.label(0), 5);
  EXPECT_EQ(d.label(1), 6);
  EXPECT_EQ(d.meta(0, 0), "640");
  EXPECT_EQ(d.meta(0, 1), "ann");
  EXPECT_EQ(d.meta(1, 1), "");  // absent: ""

  // Without labels at all: an unlabelled dataset.
  const auto c = shard("c.tar", {{"0.png", "P"}, {"1.webp", "W"}});
  d = open_shards({c.string()}, options());
  EXPECT_FALSE(d.labelled());
  EXPECT_EQ(d.size(), 2u);
}

TEST_F(Shards, EveryBadInputIsAnErrorNamingTheShardAndMember) {
  struct Case {
    std::string name;
    std::vector<std::pair<std::string, std::string>> members;
    std::string says;
  };
  const std::vector<Case> cases{
      {"nomedia.tar", {{"0.jpg", "J"}, {"1.cls", "1"}}, "key 1: no media member"},
      {"twomedia.tar",
       {{"0.jpg", "J"}, {"0.png", "P"}},
       "key 0: two media members, 0.jpg and 0.png"},
      {"apart.tar",
       {{"0.jpg", "J"}, {"1.jpg", "J"}, {"0.cls", "1"}},
       "key 0: its members are not consecutive"},
      {"badcls.tar", {{"0.jpg", "J"}, {"0.cls", "cat"}}, "member 0.cls: label 'cat'"},
      {"mixed.tar", {{"0.jpg", "J"}, {"0.cls", "1"}, {"1.jpg", "J"}}, "key 1: no label"},
  };
  for (const auto& c : cases) {
    const auto path = shard(c.name, c.members);
    const auto what = expect_shard_error([&] { open_shards({path.string()}, options()); });
    EXPECT_NE(what.find(path.string()), std::string::npos) << what;
    EXPECT_NE(what.find(c.says), std::string::npos) << what;
  }
  // A .json label that is missing, or not an integer.
  auto o = options();
  o.label_field = "y";
  const auto j = shard("json.tar", {{"0.jpg", "J"}, {"0.json", R"({"y": "one"})"}});
  auto what = expect_shard_error([&] { open_shards({j.string()}, o); });
  EXPECT_NE(what.find("member 0.json: field 'y' is \"one\""), std::string::npos) << what;
  const auto nj = shard("nojson.tar", {{"0.jpg", "J"}, {"0.json", "{not json"}});
  what = expect_shard_error([&] { open_shards({nj.string()}, o); });
  EXPECT_NE(what.find("member 0.json: not JSON"), std::string::npos) << what;

  // Not a tar file; missing; a symbolic link member.
  write(root_ / "plain.tar", std::string(3000, 'x'));
  what = expect_shard_error([&] { open_shards({(root_ / "plain.tar").string()}, options()); });
  EXPECT_NE(what.find("plain.tar: not a tar file"), std::string::npos) << what;
  what = expect_shard_error([&] { open_shards({(root_ / "missing.tar").string()}, options()); });
  EXPECT_NE(what.find("missing.tar: cannot open"), std::string::npos) << what;
  write(root_ / "src-link/0.jpg", "J");
  fs::create_symlink("0.jpg", root_ / "src-link/1.jpg");
  tar(root_ / "link.tar", root_ / "src-link", {"0.jpg", "1.jpg"});
  what = expect_shard_error([&] { open_shards({(root_ / "link.tar").string()}, options()); });
  EXPECT_NE(what.find("member 1.jpg: not a regular file"), std::string::npos) << what;
}

TEST_F(Shards, ATruncatedShardOrAMemberCutOffIsAnError) {
  const auto path = shard("t.tar", {{"0.jpg", std::string(3000, 'a')},
                                    {"1.jpg", std::string(3000, 'b')},
                                    {"2.jpg", std::string(3000, 'c')}});
  const auto index = index_shard(path.string());
  ASSERT_EQ(index.size(), 3u);
  // Cut within the last member's bytes, then within its header, then mid-way.
  for (const auto cut : {index[2].offset + 100, index[2].offset - 200, index[1].offset + 10}) {
    fs::copy_file(path, root_ / "cut.tar", fs::copy_options::overwrite_existing);
    fs::resize_file(root_ / "cut.tar", cut);
    const auto what = expect_shard_error(
        [&] { open_shards({(root_ / "cut.tar").string()}, {.use_cache = false}); });
    EXPECT_NE(what.find("cut.tar"), std::string::npos) << what;
    EXPECT_TRUE(what.find("cut off") != std::string::npos ||
                what.find("truncated") != std::string::npos)
        << what;
  }
}

TEST_F(Shards, TheCacheIsUsedRebuiltWhenCorruptAndRedoneWhenTheShardChanges) {
  const auto path = shard("c.tar", {{"0.jpg", "J0"}, {"0.cls", "1"}});
  const auto first = open_shards({path.string()}, options());
  std::vector<fs::path> caches;
  for (const auto& e : fs::directory_iterator(root_ / "cache")) caches.push_back(e.path());
  ASSERT_EQ(caches.size(), 1u);
  EXPECT_NE(caches[0].filename().string().find("c.tar."), std::string::npos);
  auto bytes = read_all(caches[0]);
  // Corrupt: any flipped byte is caught by the checksum and the index rebuilt.
  for (std::size_t at : {std::size_t(3), bytes.size() / 2, bytes.size() - 1}) {
    auto bad = bytes;
    bad[at] ^= 0x20;
    write(caches[0], bad);
    const auto again = open_shards({path.string()}, options());
    EXPECT_EQ(again.identity_hash(), first.identity_hash());
    EXPECT_EQ(read_all(caches[0]), bytes);  // rewritten
  }
  write(caches[0], "");
  EXPECT_EQ(open_shards({path.string()}, options()).identity_hash(), first.identity_hash());
  // Used: the shard rewritten with another label of the same size, its mtime put back —
  // the cache (keyed by size and mtime) still answers, with the old label.
  EXPECT_EQ(first.label(0), 1);
  const auto mtime = fs::last_write_time(path);
  shard("c.tar", {{"0.jpg", "J0"}, {"0.cls", "2"}});
  fs::last_write_time(path, mtime);
  EXPECT_EQ(open_shards({path.string()}, options()).label(0), 1);
  // The shard changes (another label, another size and mtime): indexed again.
  std::this_thread::sleep_for(10ms);  // a distinct mtime on coarse file systems
  const auto changed = shard("c.tar", {{"0.jpg", "J0"}, {"0.cls", "22"}});
  const auto d = open_shards({changed.string()}, options());
  EXPECT_EQ(d.label(0), 22);
  // Beside the shard when its folder is writable (no cache_dir).
  open_shards({path.string()}, {});
  EXPECT_TRUE(fs::exists(path.string() + ".brigade-index"));
}

// Loose JPEGs and the same files as shards: the same ids, and batches byte for byte.
class ShardBatches : public Shards {
 protected:
  void SetUp() override {
    Shards::SetUp();
    const auto loose = root_ / "loose";
    fs::create_directories(loose);
    for (int i = 0; i < 14; ++i) {
      char name[16];
      std::snprintf(name, sizeof name, "%03d.jpg", i);
      auto bytes = media::make_image(media::ImageCodec::jpeg, 90 + 13 * i, 70 + 7 * i, i);
      if (i == 5) bytes.resize(bytes.size() / 3);  // corrupt: fails in both
      media::write_file((loose / name).string(), bytes);
      names_.push_back(name);
    }
    for (int s = 0; s < 3; ++s) {
      std::vector<std::string> part;
      for (std::size_t i = s * 5; i < names_.size() && i < std::size_t(s + 1) * 5; ++i)
        part.push_back(names_[i]);
      tar(root_ / ("sh-" + std::to_string(s) + ".tar"), loose, part, "pax");
    }
  }
  std::vector<std::string> names_;
};

std::string digest(const media::Tensor& t) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const unsigned char*>(t.data());
  for (std::size_t i = 0; i < t.nbytes(); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return std::to_string(h);
}

std::vector<std::string> job_digests(RunConfig c) {
  c.batch_size = 4;
  c.threads = 2;
  c.seed = 9;
  resolve(c, [](const char*) -> const char* { return nullptr; });
  const auto d = open_dataset(c, false);
  std::vector<std::string> out;
  run_job(c, d, {.on_batch = [&](const JobBatch& b) {
            std::string ids;
            for (auto id : b.ids) ids += std::to_string(id) + ",";
            out.push_back(ids + ":" + digest(b.data));
          }});
  return out;
}

TEST_F(ShardBatches, AJobOverShardsDeliversTheLooseFilesBatchesByteForByte) {
  RunConfig loose;
  loose.data = (root_ / "loose").string();
  RunConfig sharded;
  sharded.shards = {(root_ / "sh-{0..2}.tar").string()};
  const auto a = job_digests(loose);
  EXPECT_EQ(a.size(), 4u);  // 13 good samples in batches of 4 (one failed)
  EXPECT_EQ(job_digests(sharded), a);
  sharded.transform.kind = media::TransformKind::train;
  loose.transform.kind = media::TransformKind::train;
  EXPECT_EQ(job_digests(sharded), job_digests(loose));
}

TEST_F(ShardBatches, ARemoteWorkerReadsTheSameByteRanges) {
  const transport::Security security{.token = "shards test"};
  const auto d = open_shards(
      expand_shard_spec(std::vector<std::string>{(root_ / "sh-{0..2}.tar").string()}), options());
  std::vector<EncodedSample> samples;
  for (std::size_t i = 0; i < d.size(); ++i) samples.push_back(encoded_sample(i, d.location(i)));
  const DecodeSpec spec{.transform = {.kind = media::TransformKind::train, .seed = 4}};
  auto copy = samples;
  for (auto& s : copy) read_sample(s);
  const auto here = decode_batch(spec, copy, {});
  ASSERT_EQ(here.failures.size(), 1u);
  // The worker reads the ranges the task carries, or (serving its own shards) maps ids
  // to its own locations — the trainer's then only name the sample.
  std::vector<SampleLocation> own;
  for (std::size_t i = 0; i < d.size(); ++i) own.push_back(d.location(i));
  for (bool serves_own : {false, true}) {
    transport::OperationRegistry r;
    register_decode_operations(r, serves_own ? own : std::vector<SampleLocation>{});
    transport::WorkerOptions wo;
    wo.threads = 2;
    wo.security = security;
    transport::WorkerNode worker(wo, std::move(r));
    transport::PoolOptions po;
    po.workers = {worker.address()};
    po.security = security;
    po.operations = {kDecodeImages};
    transport::RemotePool pool(po);
    ASSERT_TRUE(pool.wait_for_worker(5s, {}));
    auto task = samples;
    if (serves_own)
      for (auto& s : task) s = {.id = s.id, .path = "/trainer/only/" + s.path};
    const auto remote = remote_decode_batch(pool, spec, task, {}, {}, {});
    ASSERT_TRUE(remote);
    EXPECT_EQ(remote->ids, here.ids);
    ASSERT_EQ(remote->data.nbytes(), here.data.nbytes());
    EXPECT_EQ(std::memcmp(remote->data.data(), here.data.data(), here.data.nbytes()), 0);
    ASSERT_EQ(remote->failures.size(), 1u);
    EXPECT_EQ(remote->failures[0].id, here.failures[0].id);
  }
}

TEST_F(ShardBatches, AShardTruncatedAfterIndexingFailsItsSamplesNamingTheShard) {
  const auto d = open_shards({(root_ / "sh-2.tar").string()}, options());
  const auto last = d.location(d.size() - 1);
  fs::resize_file(last.path, last.offset + last.size / 2);
  auto s = encoded_sample(d.size() - 1, last);
  read_sample(s);
  ASSERT_TRUE(s.failed());
  EXPECT_EQ(s.failure->path, last.path);
  EXPECT_NE(s.failure->cause.find("truncated or changed since it was indexed"), std::string::npos)
      << s.failure->cause;
  EXPECT_EQ(error_code_name(s.failure->code), "io");
}

TEST_F(ShardBatches, ShuffleWindowReadsTheShardsAWindowAtATime) {
  RunConfig c;
  c.shards = {(root_ / "sh-{0..2}.tar").string()};
  c.shuffle_window = 1;
  c.batch_size = 2;
  c.threads = 2;
  c.epochs = 2;
  resolve(c, [](const char*) -> const char* { return nullptr; });
  const auto d = open_dataset(c, false);
  const auto sampler = make_sampler(c, d);
  EXPECT_EQ(sampler->fingerprint().kind, actors::SamplerKind::blocks);
  std::vector<std::uint64_t> ids;
  run_job(c, d, {.on_batch = [&](const JobBatch& b) {
            ids.insert(ids.end(), b.ids.begin(), b.ids.end());
          }});
  ASSERT_EQ(ids.size(), 26u);  // 13 good samples, twice
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<std::uint64_t> e(ids.begin() + 13 * epoch, ids.begin() + 13 * (epoch + 1));
    // One shard at a time: the shard of consecutive samples changes twice.
    int changes = 0;
    for (std::size_t i = 1; i < e.size(); ++i) changes += e[i] / 5 != e[i - 1] / 5;
    EXPECT_EQ(changes, 2) << "epoch " << epoch;
    std::sort(e.begin(), e.end());
    EXPECT_EQ(std::adjacent_find(e.begin(), e.end()), e.end());
  }
}

TEST(ShardKeys, TheKeyTableTakesShardsAsAnArrayOrOneString) {
  RunConfig c;
  apply_toml(c,
             "shards = [\"a-{0..1}.tar\", \"b.tar\"]\nimage_key = \"png;jpg\"\n"
             "label_key = \"y\"\nshuffle_window = 4\n",
             "/data/job.toml");
  EXPECT_EQ(c.shards, (std::vector<std::string>{"/data/a-{0..1}.tar", "/data/b.tar"}));
  EXPECT_EQ(shard_options(c).media_extensions, (std::vector<std::string>{"png", "jpg"}));
  EXPECT_EQ(shard_options(c).label_field, "y");
  EXPECT_EQ(c.shuffle_window, 4u);
  RunConfig f;
  apply_setting(f, "shards", "x-{a,b}.tar, y.tar", "--shards");
  EXPECT_EQ(f.shards, (std::vector<std::string>{"x-{a,b}.tar", "y.tar"}));
  RunConfig both = c;
  both.data = "/images";
  EXPECT_THROW(resolve(both, [](const char*) -> const char* { return nullptr; }), ConfigError);
}

}  // namespace
}  // namespace brigade::launch::shards_test
