#include "launch/loader/manifest.h"

#include <csv.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <simdjson.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "launch/loader/detail/launch_environment.h"
#include "launch/loader/job_config.h"
#include "launch/loader/object_reads.h"

namespace brigade::launch {

namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail_at(const std::string& name, std::size_t line, std::string_view what) {
  throw ConfigError(fmt::format("manifest {}:{}: {}", name, line, what), "manifest");
}

std::string_view trim_blank(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

// `values` sorted: an LSD radix sort, 16 bits a pass (0.37 s for 10 M hashes where
// std::sort takes 0.91 s).
std::vector<std::size_t> radix_sorted(const std::vector<std::size_t>& values) {
  std::vector<std::size_t> out(values), buffer(values.size());
  std::vector<std::size_t> count(1 << 16);
  for (int shift = 0; shift < 64; shift += 16) {
    std::fill(count.begin(), count.end(), 0);
    for (const auto v : out) ++count[(v >> shift) & 0xFFFF];
    std::size_t at = 0;
    for (auto& c : count) at += std::exchange(c, at);
    for (const auto v : out) buffer[count[(v >> shift) & 0xFFFF]++] = v;
    out.swap(buffer);
  }
  return out;
}

// The rows as they are parsed, into the Dataset: labels (integers, or names numbered
// in order of appearance and renumbered by sorted name at the end), duplicate paths.
class ManifestBuilder {
 public:
  ManifestBuilder(const std::string& name, std::string root, const ManifestOptions& options,
                  const std::optional<std::vector<std::string>>& classes)
      : name_(name), dataset_(std::move(root)) {
    dataset_.set_meta_columns(options.meta);
    if (classes) {
      for (std::size_t i = 0; i < classes->size(); ++i) class_index_[(*classes)[i]] = i;
      dataset_.set_classes(*classes);
      fixed_classes_ = true;
    }
  }

  Dataset& dataset() { return dataset_; }

  // A row of line `line`; `label` null for an unlabelled manifest.
  void row(std::size_t line, std::string_view path, const std::string_view* label,
           std::span<const std::string_view> meta) {
    if (path.empty()) fail_at(name_, line, "empty path");
    SampleEntry e{.identity = path, .meta = meta};
    if (label) e.label = label_of(line, *label);
    if (line != expected_line_) lines_.emplace_back(dataset_.size(), line);
    expected_line_ = line + 1;
    hashes_.push_back(std::hash<std::string_view>{}(path));
    try {
      dataset_.add(e);
    } catch (const std::invalid_argument& error) {
      fail_at(name_, line, error.what());
    }
  }

  Dataset finish(std::size_t last_line) {
    if (dataset_.empty()) fail_at(name_, last_line, "no rows: the manifest lists no sample");
    check_duplicates();
    if (!names_.empty()) {
      std::vector<std::size_t> order(names_.size());
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::sort(order.begin(), order.end(),
                [this](std::size_t a, std::size_t b) { return names_[a] < names_[b]; });
      std::vector<std::int64_t> map(names_.size());
      std::vector<std::string> sorted;
      for (std::size_t i = 0; i < order.size(); ++i) {
        map[order[i]] = static_cast<std::int64_t>(i);
        sorted.push_back(std::move(names_[order[i]]));
      }
      dataset_.remap_labels(map, std::move(sorted));
    }
    dataset_.shrink_to_fit();
    return std::move(dataset_);
  }

  // Where line numbers stop following row numbers (blank lines, multi-line records).
  void expect_first_row_at(std::size_t line) { expected_line_ = first_line_ = line; }

 private:
  std::int64_t label_of(std::size_t line, std::string_view text) {
    text = trim_blank(text);
    if (text.empty()) fail_at(name_, line, "empty label");
    const auto number = detail::parse_int(text);
    if (fixed_classes_) {
      if (auto it = class_index_.find(std::string(text)); it != class_index_.end())
        return static_cast<std::int64_t>(it->second);
      if (!number)
        fail_at(name_, line, fmt::format("unknown class '{}' (not in the classes file)", text));
      if (*number < 0 || static_cast<std::uint64_t>(*number) >= class_index_.size())
        fail_at(name_, line,
                fmt::format("label {} out of range: the classes file names {} classes", *number,
                            class_index_.size()));
      return *number;
    }
    const bool integer =
        number.has_value() || (text.front() == '-' && text.size() > 1 &&
                               text.find_first_not_of("0123456789", 1) == std::string_view::npos);
    if (integer && !first_name_line_) {
      if (!number || *number < 0)
        fail_at(name_, line,
                fmt::format("label {}: expected an integer >= 0 or a class name", text));
      if (!first_integer_line_) first_integer_line_ = line;
      return *number;
    }
    if (integer || first_integer_line_) {
      fail_at(name_, line,
              fmt::format("label '{}': the label column mixes integers (line {}) and class names "
                          "(line {}); give a classes file to say which is which",
                          text, first_integer_line_ ? *first_integer_line_ : line,
                          first_name_line_ ? *first_name_line_ : line));
    }
    if (!first_name_line_) first_name_line_ = line;
    auto [it, added] = class_index_.try_emplace(std::string(text), names_.size());
    if (added) names_.emplace_back(text);
    return static_cast<std::int64_t>(it->second);
  }

  std::size_t line_of(std::size_t row) const {
    auto it = std::upper_bound(lines_.begin(), lines_.end(), row,
                               [](std::size_t r, const auto& p) { return r < p.first; });
    if (it == lines_.begin()) return first_line_ + row;
    --it;
    return it->second + (row - it->first);
  }

  void check_duplicates() {
    std::vector<std::size_t> sorted = radix_sorted(hashes_);
    std::vector<std::size_t> repeated;
    for (std::size_t i = 1; i < sorted.size(); ++i) {
      if (sorted[i] == sorted[i - 1] && (repeated.empty() || repeated.back() != sorted[i]))
        repeated.push_back(sorted[i]);
    }
    sorted = {};
    if (!repeated.empty()) {
      // Hashes seen twice: compare the paths themselves (a collision is no duplicate).
      std::unordered_map<std::string_view, std::size_t> first;
      for (std::size_t row = 0; row < hashes_.size(); ++row) {
        if (!std::binary_search(repeated.begin(), repeated.end(), hashes_[row])) continue;
        auto [it, added] = first.try_emplace(dataset_.identity(row), row);
        if (!added)
          fail_at(name_, line_of(row),
                  fmt::format("duplicate path '{}' (first at line {})", dataset_.identity(row),
                              line_of(it->second)));
      }
    }
    hashes_ = {};
  }

  const std::string& name_;
  Dataset dataset_;
  std::unordered_map<std::string, std::size_t> class_index_;
  std::vector<std::string> names_;  // class names in order of appearance
  bool fixed_classes_ = false;
  std::optional<std::size_t> first_integer_line_, first_name_line_;
  std::vector<std::size_t> hashes_;
  std::vector<std::pair<std::size_t, std::size_t>> lines_;  // (row, line) where they jump
  std::size_t first_line_ = 1, expected_line_ = 1;
};

// Calls `fn(line_number, line)` for each line of `text` (without its '\n').
template <class Fn>
void for_each_line(std::string_view text, Fn&& fn) {
  std::size_t line = 1;
  while (!text.empty()) {
    const auto end = text.find('\n');
    const auto length = end == std::string_view::npos ? text.size() : end + 1;
    fn(line++, text.substr(0, length));
    text.remove_prefix(length);
  }
}

std::size_t count_lines(std::string_view text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
}

// -- CSV and TSV (libcsv) -----------------------------------------------------------

struct CsvState {
  std::string fields;             // this record's fields, packed
  std::vector<std::size_t> ends;  // field i ends here
  bool record_done = false;
  bool too_many = false;
};

void csv_field(void* bytes, std::size_t size, void* data) {
  auto& s = *static_cast<CsvState*>(data);
  s.fields.append(static_cast<const char*>(bytes), size);
  s.ends.push_back(s.fields.size());
}

void csv_record(int, void* data) { static_cast<CsvState*>(data)->record_done = true; }

int tsv_space(unsigned char c) { return c == ' '; }

using CsvParser = std::unique_ptr<csv_parser, void (*)(csv_parser*)>;

void free_parser(csv_parser* p) {
  csv_free(p);
  delete p;
}

Dataset parse_csv(std::string_view text, char delimiter, const std::string& name, std::string root,
                  const ManifestOptions& options,
                  const std::optional<std::vector<std::string>>& classes) {
  CsvParser parser(new csv_parser, free_parser);
  if (csv_init(parser.get(), CSV_STRICT | CSV_STRICT_FINI) != 0)
    throw std::bad_alloc();  // csv_init fails only to allocate
  csv_set_delim(parser.get(), delimiter);
  if (delimiter == '\t') csv_set_space_func(parser.get(), tsv_space);
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);

  ManifestBuilder builder(name, std::move(root), options, classes);
  builder.dataset().reserve(count_lines(text), 0);
  CsvState state;
  std::vector<std::string> header;
  std::size_t path_at = 0;
  std::optional<std::size_t> label_at;
  std::vector<std::size_t> meta_at;
  std::vector<std::string_view> fields, meta(options.meta.size());

  const auto column = [&](const std::string& wanted, std::size_t line,
                          const char* what) -> std::optional<std::size_t> {
    const auto it = std::find(header.begin(), header.end(), wanted);
    if (it != header.end()) return static_cast<std::size_t>(it - header.begin());
    if (what) fail_at(name, line, fmt::format("no {} column '{}' in the header", what, wanted));
    return std::nullopt;
  };
  const auto record = [&](std::size_t line) {
    fields.clear();
    std::size_t begin = 0;
    for (const auto end : state.ends) {
      fields.push_back(std::string_view(state.fields).substr(begin, end - begin));
      begin = end;
    }
    if (header.empty()) {
      for (const auto f : fields) {
        if (std::find(header.begin(), header.end(), f) != header.end())
          fail_at(name, line, fmt::format("column '{}' named twice in the header", f));
        header.emplace_back(f);
      }
      path_at = *column(options.path_column, line, "path");
      label_at = options.label_column ? column(*options.label_column, line, "label")
                                      : column("label", line, nullptr);
      for (const auto& m : options.meta) meta_at.push_back(*column(m, line, "meta"));
      builder.expect_first_row_at(line + 1);
    } else {
      if (fields.size() != header.size())
        fail_at(name, line,
                fmt::format("{} fields, where the header names {} columns", fields.size(),
                            header.size()));
      for (std::size_t m = 0; m < meta_at.size(); ++m) meta[m] = fields[meta_at[m]];
      builder.row(line, fields[path_at], label_at ? &fields[*label_at] : nullptr, meta);
    }
    state.fields.clear();
    state.ends.clear();
    state.record_done = false;
  };

  bool at_boundary = true;  // no byte of a record fed yet
  std::size_t record_line = 1, last_line = 1;
  for_each_line(text, [&](std::size_t line, std::string_view bytes) {
    last_line = line;
    if (at_boundary && trim_blank(bytes).empty()) return;  // a blank line
    if (at_boundary) record_line = line;
    at_boundary = false;
    if (csv_parse(parser.get(), bytes.data(), bytes.size(), csv_field, csv_record, &state) !=
        bytes.size())
      fail_at(name, line,
              fmt::format("malformed {}: {}", delimiter == '\t' ? "TSV" : "CSV",
                          csv_strerror(csv_error(parser.get()))));
    if (state.record_done) {
      record(record_line);
      at_boundary = true;
    }
  });
  if (csv_fini(parser.get(), csv_field, csv_record, &state) != 0)
    fail_at(name, last_line, "malformed quoting: a quoted field is not closed");
  if (state.record_done) record(record_line);
  if (header.empty()) fail_at(name, last_line, "empty manifest: no header");
  return builder.finish(last_line);
}

// -- JSON Lines (simdjson) ----------------------------------------------------------

Dataset parse_jsonl(std::string_view text, const std::string& name, std::string root,
                    const ManifestOptions& options,
                    const std::optional<std::vector<std::string>>& classes) {
  // The DOM parser: it picks the CPU's fastest kernels at run time (On Demand's are
  // chosen when compiling, without -march the portable fallback).
  namespace dom = simdjson::dom;
  ManifestBuilder builder(name, std::move(root), options, classes);
  builder.dataset().reserve(count_lines(text), 0);
  dom::parser parser;
  std::string padded;
  std::optional<std::string> label_column = options.label_column;
  bool first = true;
  std::vector<std::string_view> meta(options.meta.size());
  std::vector<std::string> meta_text(options.meta.size());
  std::vector<char> seen_meta(options.meta.size());
  std::string label_text;
  std::size_t last_line = 1;

  // A value's text: a string's value, null "", anything else its JSON text (minified).
  const auto text_of = [](dom::element v, std::string& storage) -> std::string_view {
    if (v.is_string()) return std::string_view(v);
    if (v.is_null()) return {};
    storage = simdjson::minify(v);
    return storage;
  };

  for_each_line(text, [&](std::size_t line, std::string_view bytes) {
    last_line = line;
    if (trim_blank(bytes).empty()) return;
    padded.assign(bytes);
    padded.resize(bytes.size() + simdjson::SIMDJSON_PADDING);
    dom::element doc;
    if (auto e = parser.parse(padded.data(), bytes.size(), false).get(doc))
      fail_at(name, line, fmt::format("malformed JSON: {}", simdjson::error_message(e)));
    dom::object object;
    if (doc.get(object)) fail_at(name, line, "expected a JSON object");
    std::optional<std::string_view> path;
    std::optional<std::string_view> label;
    std::fill(seen_meta.begin(), seen_meta.end(), 0);
    for (const auto field : object) {
      const std::string_view key = field.key;
      const auto value = field.value;
      const bool is_label = label_column ? key == *label_column : first && key == "label";
      if (key == options.path_column) {
        if (path) fail_at(name, line, fmt::format("key '{}' given twice", key));
        if (!value.is_string())
          fail_at(name, line, fmt::format("path '{}': expected a string", key));
        path = std::string_view(value);
      } else if (is_label) {
        if (label) fail_at(name, line, fmt::format("key '{}' given twice", key));
        if (value.is_string()) {
          label = std::string_view(value);
        } else if (value.is_int64()) {
          label_text = std::to_string(std::int64_t(value));
          label = label_text;
        } else {
          fail_at(name, line,
                  fmt::format("label {}: expected an integer >= 0 or a class name",
                              simdjson::minify(value)));
        }
      }
      for (std::size_t m = 0; m < options.meta.size(); ++m) {
        if (key != options.meta[m]) continue;
        if (seen_meta[m]) fail_at(name, line, fmt::format("key '{}' given twice", key));
        seen_meta[m] = 1;
        meta[m] = text_of(value, meta_text[m]);
      }
    }
    if (first && !label_column && label) label_column = "label";
    first = false;
    if (!path) fail_at(name, line, fmt::format("no path column '{}'", options.path_column));
    if (label_column && !label)
      fail_at(name, line, fmt::format("no label column '{}'", *label_column));
    for (std::size_t m = 0; m < meta.size(); ++m) {
      if (!seen_meta[m]) fail_at(name, line, fmt::format("no meta column '{}'", options.meta[m]));
    }
    builder.row(line, *path, label ? &*label : nullptr, meta);
  });
  return builder.finish(last_line);
}

// The file's bytes, mapped (read-only) for as long as the object lives.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      throw ConfigError(fmt::format("manifest {}: {}", path, std::strerror(errno)), "manifest");
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw ConfigError(fmt::format("manifest {}: not a regular file", path), "manifest");
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
      data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (data_ == MAP_FAILED) {
        const int error = errno;
        ::close(fd);
        throw ConfigError(fmt::format("manifest {}: {}", path, std::strerror(error)), "manifest");
      }
      ::madvise(data_, size_, MADV_SEQUENTIAL);
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (size_ > 0) ::munmap(data_, size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::string_view text() const { return {static_cast<const char*>(data_), size_}; }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

std::vector<std::string> read_classes(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw ConfigError(fmt::format("classes {}: cannot read the file", file), "classes");
  std::vector<std::string> names;
  std::string line;
  for (std::size_t n = 1; std::getline(in, line); ++n) {
    const auto name = trim_blank(line);
    if (name.empty()) {
      throw ConfigError(fmt::format("classes {}:{}: blank line (one class name per line)", file, n),
                        "classes");
    }
    if (std::find(names.begin(), names.end(), name) != names.end())
      throw ConfigError(fmt::format("classes {}:{}: class '{}' named twice", file, n, name),
                        "classes");
    names.emplace_back(name);
  }
  if (names.empty()) throw ConfigError(fmt::format("classes {}: no class names", file), "classes");
  return names;
}

}  // namespace

std::optional<ManifestFormat> manifest_format(std::string_view name) {
  if (name == "csv") return ManifestFormat::csv;
  if (name == "tsv") return ManifestFormat::tsv;
  if (name == "jsonl" || name == "ndjson") return ManifestFormat::jsonl;
  return std::nullopt;
}

std::optional<ManifestFormat> manifest_format_of(std::string_view file) {
  auto ext = fs::path(file).extension().string();
  if (ext.empty()) return std::nullopt;
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return manifest_format(std::string_view(ext).substr(1));
}

Dataset parse_manifest(std::string_view text, const std::string& name, std::string root,
                       const ManifestOptions& options,
                       const std::optional<std::vector<std::string>>& classes) {
  if (!options.format) throw std::logic_error("parse_manifest: no format");
  switch (*options.format) {
    case ManifestFormat::csv:
      return parse_csv(text, ',', name, std::move(root), options, classes);
    case ManifestFormat::tsv:
      return parse_csv(text, '\t', name, std::move(root), options, classes);
    case ManifestFormat::jsonl:
      return parse_jsonl(text, name, std::move(root), options, classes);
  }
  throw std::logic_error("parse_manifest: unknown format");
}

ManifestOptions manifest_options(const RunConfig& c) {
  ManifestOptions o{.path_column = c.path_column, .classes_file = c.classes, .meta = c.meta};
  if (!c.manifest_format.empty()) o.format = manifest_format(c.manifest_format);
  if (!c.label_column.empty()) o.label_column = c.label_column;
  return o;
}

Dataset read_manifest(const std::string& file, const ManifestOptions& options) {
  ManifestOptions o = options;
  if (!o.format) o.format = manifest_format_of(file);
  if (!o.format) {
    throw ConfigError(fmt::format("manifest {}: unknown format: name it .csv, .tsv, .jsonl or "
                                  ".ndjson, or give manifest_format",
                                  file),
                      "manifest_format");
  }
  std::optional<std::vector<std::string>> classes;
  if (!o.classes_file.empty()) classes = read_classes(o.classes_file);
  if (is_object_url(file)) {
    // Relative paths inside resolve against the manifest's URL ("s3://b/x/train.jsonl":
    // "s3://b/x/<path>").
    const auto text = fetch_object_text(file, "manifest");
    return parse_manifest(text, file, fs::path(file).parent_path().string(), o, classes);
  }
  const MappedFile mapped(file);
  return parse_manifest(mapped.text(), file, fs::path(file).parent_path().string(), o, classes);
}

}  // namespace brigade::launch
