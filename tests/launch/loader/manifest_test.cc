#include "launch/loader/manifest.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "launch/loader/job_config.h"
#include "launch/loader/job_settings.h"
#include "launch/loader/sources.h"
#include "tests/transport/wire/mutations.h"

namespace brigade::launch {
namespace {

namespace fs = std::filesystem;

Dataset parse(std::string_view text, ManifestFormat format, ManifestOptions options = {},
              const std::optional<std::vector<std::string>>& classes = std::nullopt) {
  options.format = format;
  return parse_manifest(text, "m", "/root", options, classes);
}

// The ConfigError's message for `text` (fails the test if it parses).
std::string error_of(std::string_view text, ManifestFormat format, ManifestOptions options = {},
                     const std::optional<std::vector<std::string>>& classes = std::nullopt) {
  try {
    parse(text, format, std::move(options), classes);
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "manifest");
    return e.what();
  }
  ADD_FAILURE() << "parsed: " << text;
  return {};
}

std::vector<std::string> identities(const Dataset& d) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < d.size(); ++i) out.emplace_back(d.identity(i));
  return out;
}

std::vector<std::int64_t> labels(const Dataset& d) {
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < d.size(); ++i) out.push_back(d.label(i));
  return out;
}

TEST(Manifest, CsvQuotingEmbeddedCommasAndNewlinesBomAndCrlf) {
  const auto d = parse(
      "\xEF\xBB\xBFpath,label,caption\r\n"
      "a.jpg,1,plain\r\n"
      "\"b, with comma.jpg\",0,\"two\nlines\"\r\n"
      "/abs/c.jpg,2,\"say \"\"hi\"\"\"\r\n",
      ManifestFormat::csv, {.meta = {"caption"}});
  EXPECT_EQ(identities(d), (std::vector<std::string>{"a.jpg", "b, with comma.jpg", "/abs/c.jpg"}));
  EXPECT_EQ(labels(d), (std::vector<std::int64_t>{1, 0, 2}));
  EXPECT_TRUE(d.classes().empty());
  EXPECT_EQ(d.path(0), "/root/a.jpg");
  EXPECT_EQ(d.path(2), "/abs/c.jpg");
  ASSERT_EQ(d.meta_columns(), (std::vector<std::string>{"caption"}));
  EXPECT_EQ(d.meta(1, 0), "two\nlines");
  EXPECT_EQ(d.meta(2, 0), "say \"hi\"");
}

TEST(Manifest, ClassNamesAreNumberedInSortedOrder) {
  const auto d =
      parse("path,label\nx.jpg,dog\ny.jpg,cat\nz.jpg,dog\nw.jpg,ant\n", ManifestFormat::csv);
  EXPECT_EQ(d.classes(), (std::vector<std::string>{"ant", "cat", "dog"}));
  EXPECT_EQ(labels(d), (std::vector<std::int64_t>{2, 1, 2, 0}));
}

TEST(Manifest, AClassesFileNumbersNamesByLineAndBoundsIntegers) {
  const std::vector<std::string> classes{"zebra", "ant"};
  const auto d =
      parse("path,label\nx.jpg,ant\ny.jpg,zebra\nz.jpg,1\n", ManifestFormat::csv, {}, classes);
  EXPECT_EQ(d.classes(), classes);
  EXPECT_EQ(labels(d), (std::vector<std::int64_t>{1, 0, 1}));
  EXPECT_NE(error_of("path,label\nx.jpg,ant\ny.jpg,2\n", ManifestFormat::csv, {}, classes)
                .find("m:3: label 2 out of range: the classes file names 2 classes"),
            std::string::npos);
  EXPECT_NE(error_of("path,label\nx.jpg,wolf\n", ManifestFormat::csv, {}, classes)
                .find("m:2: unknown class 'wolf'"),
            std::string::npos);
}

TEST(Manifest, WithoutALabelColumnTheDatasetIsUnlabelled) {
  const auto d = parse("path,other\na.jpg,1\n", ManifestFormat::csv);
  EXPECT_FALSE(d.labelled());
  EXPECT_NE(error_of("path,other\na.jpg,1\n", ManifestFormat::csv, {.label_column = "cls"})
                .find("m:1: no label column 'cls' in the header"),
            std::string::npos);
  const auto named = parse("file,cls\na.jpg,3\n", ManifestFormat::csv,
                           {.path_column = "file", .label_column = "cls"});
  EXPECT_EQ(labels(named), (std::vector<std::int64_t>{3}));
}

TEST(Manifest, TsvSplitsOnTabsOnly) {
  const auto d = parse("path\tlabel\tnote\nmy file.jpg\t0\ta, b\n\nb.jpg\t1\tc\n",
                       ManifestFormat::tsv, {.meta = {"note"}});
  EXPECT_EQ(identities(d), (std::vector<std::string>{"my file.jpg", "b.jpg"}));
  EXPECT_EQ(d.meta(0, 0), "a, b");
}

TEST(Manifest, JsonLinesStringsNumbersAndNull) {
  const auto d = parse(
      "{\"path\": \"a\\u00e9.jpg\", \"label\": \"cat\", \"w\": 0.5, \"tags\": [1,2], \"n\": null}\n"
      "\n"
      "{\"label\": \"dog\", \"path\": \"b.jpg\", \"w\": 2, \"tags\": {\"k\": 1}, \"n\": \"x\"}\n",
      ManifestFormat::jsonl, {.meta = {"w", "tags", "n", "path"}});
  EXPECT_EQ(identities(d), (std::vector<std::string>{"a\xC3\xA9.jpg", "b.jpg"}));
  EXPECT_EQ(d.classes(), (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(labels(d), (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(d.meta(0, 0), "0.5");
  EXPECT_EQ(d.meta(0, 1), "[1,2]");
  EXPECT_EQ(d.meta(0, 2), "");
  EXPECT_EQ(d.meta(1, 1), "{\"k\":1}");
  EXPECT_EQ(d.meta(1, 3), "b.jpg");
  const auto ints = parse("{\"path\": \"a\", \"label\": 7}\n{\"path\": \"b\", \"label\": 0}",
                          ManifestFormat::jsonl);
  EXPECT_EQ(labels(ints), (std::vector<std::int64_t>{7, 0}));
}

TEST(Manifest, EveryBadInputNamesTheFileLineAndCause) {
  const auto csv = ManifestFormat::csv;
  const auto json = ManifestFormat::jsonl;
  const std::vector<std::tuple<std::string, ManifestFormat, ManifestOptions, std::string>> cases{
      {"", csv, {}, "m:1: empty manifest: no header"},
      {"path,label\n", csv, {}, "m:1: no rows"},
      {"", json, {}, "m:1: no rows"},
      {"file,label\na,1\n", csv, {}, "m:1: no path column 'path' in the header"},
      {"path,label\na,1\nb\n", csv, {}, "m:3: 1 fields, where the header names 2 columns"},
      {"path,path\na,b\n", csv, {}, "m:1: column 'path' named twice"},
      {"path\na\n", csv, {.meta = {"x"}}, "m:1: no meta column 'x' in the header"},
      {"path,label\na,1\nb,-2\n", csv, {}, "m:3: label -2: expected an integer >= 0"},
      {"path,label\na,1\nb,\n", csv, {}, "m:3: empty label"},
      {"path,label\na,1\nb,cat\n",
       csv,
       {},
       "m:3: label 'cat': the label column mixes integers (line 2)"},
      {"path,label\na,cat\nb,2\n", csv, {}, "m:3: label '2': the label column mixes integers"},
      {"path,label\na,1\n\nb,2\na,3\n", csv, {}, "m:5: duplicate path 'a' (first at line 2)"},
      {"path\n\"a\nb\",\n", csv, {}, "m:2: 2 fields, where the header names 1 columns"},
      {"path\n\"a\"b\n", csv, {}, "m:2: malformed CSV"},
      {"path\n\"abc\n", csv, {}, "m:2: malformed quoting: a quoted field is not closed"},
      {"path\n,\n", csv, {}, "m:2: 2 fields"},
      {"path,label\n,1\n", csv, {}, "m:2: empty path"},
      {"{\"path\": \"a\"}\n{\"path\": \"b\"\n", json, {}, "m:2: malformed JSON"},
      {"{\"path\": \"a\"} x\n", json, {}, "m:1: malformed JSON"},
      {"[1]\n", json, {}, "m:1: expected a JSON object"},
      {"{\"file\": \"a\"}\n", json, {}, "m:1: no path column 'path'"},
      {"{\"path\": 3}\n", json, {}, "m:1: path 'path': expected a string"},
      {"{\"path\": \"a\", \"label\": 1}\n{\"path\": \"b\"}\n",
       json,
       {},
       "m:2: no label column 'label'"},
      {"{\"path\": \"a\", \"label\": 1.5}\n", json, {}, "m:1: label 1.5: expected an integer"},
      {"{\"path\": \"a\", \"label\": true}\n", json, {}, "m:1: label true: expected an integer"},
      {"{\"path\": \"a\", \"path\": \"b\"}\n", json, {}, "m:1: key 'path' given twice"},
      {"{\"path\": \"a\"}\n{\"path\": \"a\"}\n",
       json,
       {},
       "m:2: duplicate path 'a' (first at line 1)"},
      {"{\"path\": \"a\"}\n", json, {.meta = {"w"}}, "m:1: no meta column 'w'"},
  };
  for (const auto& [text, format, options, want] : cases) {
    const auto got = error_of(text, format, options);
    EXPECT_NE(got.find("manifest " + want), std::string::npos) << text << "\ngot: " << got;
  }
}

TEST(Manifest, ReadsAFileByExtensionRootedAtItsFolder) {
  const auto dir = fs::temp_directory_path() / ("brigade_manifest_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "m.JSONL") << "{\"path\": \"x/a.jpg\", \"label\": \"b\"}\n";
  std::ofstream(dir / "classes.txt") << "a\nb\n";
  const auto d =
      read_manifest((dir / "m.JSONL").string(), {.classes_file = (dir / "classes.txt").string()});
  EXPECT_EQ(d.path(0), (dir / "x/a.jpg").string());
  EXPECT_EQ(labels(d), (std::vector<std::int64_t>{1}));
  std::ofstream(dir / "m.txt") << "path\na\n";
  EXPECT_THROW(read_manifest((dir / "m.txt").string(), {}), ConfigError);
  EXPECT_EQ(read_manifest((dir / "m.txt").string(), {.format = ManifestFormat::csv}).size(), 1u);
  EXPECT_THROW(read_manifest((dir / "missing.csv").string(), {}), ConfigError);
  std::ofstream(dir / "dup.txt") << "a\n\na\n";
  try {
    read_manifest((dir / "m.txt").string(),
                  {.format = ManifestFormat::csv, .classes_file = (dir / "dup.txt").string()});
    ADD_FAILURE() << "a classes file with a blank line was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "classes");
    EXPECT_NE(std::string(e.what()).find("dup.txt:2: blank line"), std::string::npos);
  }
  fs::remove_all(dir);
}

TEST(Manifest, KeysFromTomlAndFlagsReachTheListing) {
  RunConfig c;
  apply_toml(c, R"(
manifest = "lists/train.tsv"
manifest_format = "tsv"
path_column = "file"
label_column = "cls"
classes = "classes.txt"
meta = ["caption", "width"]
)",
             "/jobs/run.toml");
  EXPECT_EQ(c.manifest, "/jobs/lists/train.tsv");  // relative to the TOML's folder
  EXPECT_EQ(c.classes, "/jobs/classes.txt");
  const auto o = manifest_options(c);
  EXPECT_EQ(o.format, ManifestFormat::tsv);
  EXPECT_EQ(o.path_column, "file");
  EXPECT_EQ(o.label_column, "cls");
  EXPECT_EQ(o.meta, (std::vector<std::string>{"caption", "width"}));
  apply_setting(c, "meta", "a, b", "--meta");
  EXPECT_EQ(c.meta, (std::vector<std::string>{"a", "b"}));
  EXPECT_THROW(apply_setting(c, "meta", "a,a", "--meta"), ConfigError);
  EXPECT_THROW(apply_setting(c, "manifest_format", "xml", "--manifest-format"), ConfigError);
  c.data = "images";
  try {
    resolve(c, [](const char*) -> const char* { return nullptr; });
    ADD_FAILURE() << "manifest and data were both accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "manifest");
  }
  RunConfig folder;
  folder.data = "images";
  folder.meta = {"caption"};
  try {
    open_dataset(folder, false);
    ADD_FAILURE() << "meta without a manifest was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "meta");
  }
}

// Random and mutated manifests: each parses into a dataset or throws ConfigError,
// never anything else (the ASan stage of scripts/test.sh runs this binary).
TEST(Manifest, MutatedAndRandomManifestsGiveADatasetOrAnError) {
  const std::string csv =
      "\xEF\xBB\xBFpath,label,caption\r\na.jpg,cat,\"x, \"\"y\"\"\"\r\n\"b\nc.jpg\",dog,z\r\n"
      "d.jpg,cat,\r\n";
  const std::string tsv = "path\tlabel\na.jpg\t1\nb.jpg\t2\n";
  const std::string jsonl =
      "{\"path\": \"a.jpg\", \"label\": 1, \"caption\": \"x\\ty\", \"w\": [1, {\"k\": null}]}\n"
      "{\"path\": \"b.jpg\", \"label\": 2, \"caption\": 3.5e3, \"w\": false}\n";
  const std::vector<std::pair<std::string, ManifestFormat>> valid{
      {csv, ManifestFormat::csv}, {tsv, ManifestFormat::tsv}, {jsonl, ManifestFormat::jsonl}};
  std::mt19937 random(23);
  int parsed = 0, refused = 0;
  for (int round = 0; round < 3000; ++round) {
    const auto& [text, format] = valid[round % valid.size()];
    const auto bytes =
        transport::test::mutated(std::vector<char>(text.begin(), text.end()), round / 3, random);
    ManifestOptions options{.meta = {"caption"}};
    if (format == ManifestFormat::tsv) options.meta.clear();
    try {
      const auto d = parse(std::string_view(bytes.data(), bytes.size()), format, options);
      ASSERT_FALSE(d.empty());
      for (std::size_t i = 0; i < d.size(); ++i) (void)d.path(i);
      ++parsed;
    } catch (const ConfigError&) {
      ++refused;
    }
  }
  EXPECT_GT(parsed, 0);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace brigade::launch
