#pragma once

// The samples of a job: for sample i (its id), its identity (what checkpoints
// fingerprint), where its bytes are (a file, or a byte range of a container file: a tar
// shard's member), its label and its metadata. Built once by a listing (list_folder,
// read_list, a manifest, a shard index), then read-only: the read stage, a remote
// decode, the batches' labels and the checkpoint's fingerprint all read the same one.
//
// PATHS. An identity is a path relative to the dataset's root (a folder's files, a
// list's or manifest's entries) or absolute; path(i) is root/identity for a relative
// one, the identity itself for an absolute one. A member's identity names its container
// and the member ("shards/train-000001.tar/000123.jpg"); its location is the
// container's path with the member's byte range.
//
// LABELS. A dataset is labelled (every sample has a label, an integer ≥ 0) or not (no
// sample has one): add() refuses a mix. classes() names label values 0 … n-1 when the
// labels come from class names (folders, a manifest's names, `--classes`); it is empty
// for plain integer labels. The identity hash covers the classes and labels of a
// labelled dataset, so a checkpoint of another labelling does not resume this one.
//
// JOINED DATASETS. join() puts several datasets (the sources of a mix: a config's
// [[sources]]) one after the other in one id space: source s's sample j is id
// offset(s) + j, with its identity, location, label and metadata unchanged, so every
// reader by id (the read stage, a remote worker, the batches' labels) is unchanged too.
// Each source keeps its own root, containers, classes and labels: a label is an index
// into its own source's classes (two sources' label 0 may be different classes), and
// classes() of the joined dataset is empty. sources() lists them; a dataset that is not
// joined has none.
//
// METADATA. Named columns (set_meta_columns() before the first add()), one text value
// per sample and column ("" where the source has none).
//
// MEMORY. Strings are packed into shared buffers: beyond the strings' bytes a sample
// holds 8 bytes (its identity's offset), 8 with a label, 8 per metadata column and 20
// as a member (container, offset, size).
//
// THREADING. Built by one thread; const member functions may then be called from any
// number of threads.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace brigade::launch {

/// SampleLocation::size of a sample that is its whole file.
inline constexpr std::uint64_t kWholeFile = ~std::uint64_t{0};

/// Where a sample's bytes are: `path`, from byte `offset`, `size` bytes (kWholeFile:
/// the whole file, offset 0).
struct SampleLocation {
  std::string path{};
  std::uint64_t offset = 0;
  std::uint64_t size = kWholeFile;
  friend bool operator==(const SampleLocation&, const SampleLocation&) = default;
};

/// A byte range of a container file (Dataset::add_container's index).
struct MemberRange {
  std::uint32_t container = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

/// One sample as a listing adds it (the views are copied).
struct SampleEntry {
  std::string_view identity{};
  std::optional<std::int64_t> label{};  // ≥ 0
  // A container's byte range, else the file `identity`: every sample of a dataset is
  // a member, or none is.
  std::optional<MemberRange> member{};
  std::span<const std::string_view> meta{};  // one per meta_columns(), in their order
};

/// One source of a joined dataset: ids [offset, offset + size).
struct DatasetSource {
  std::string name{};
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::vector<std::string> classes{};  // its labels' class names (empty: integer labels)
  std::uint64_t identity_hash = 0;     // its own Dataset::identity_hash()
  // Its containers (tar shards) are the joined dataset's [first_container,
  // first_container + containers).
  std::uint32_t first_container = 0;
  std::uint32_t containers = 0;
};

class Dataset {
 public:
  /// An empty dataset whose relative identities are paths under `root` ("": the
  /// working directory).
  explicit Dataset(std::string root = {});

  /// The sources one after the other in one id space (JOINED DATASETS), named by
  /// `names` (as many). Throws std::invalid_argument naming the source for one without
  /// samples, labels in some sources only, or metadata columns that differ.
  static Dataset join(std::vector<Dataset> sources, std::vector<std::string> names);

  /// Names the metadata columns; before the first add().
  void set_meta_columns(std::vector<std::string> names);
  /// Names the label values 0 … n-1 (class names); every label added must be < n.
  void set_classes(std::vector<std::string> classes);
  /// A container file (a tar shard) members refer to: its index. An absolute path, or
  /// relative to the root.
  std::uint32_t add_container(std::string_view path);
  /// Appends sample size() and returns its id. Throws std::invalid_argument for a label
  /// where the dataset has none (or none where it has labels), a negative label, one
  /// out of classes()' range, a member of an unknown container or a meta span of
  /// another length than meta_columns(): the listing names the input it came from.
  std::uint64_t add(const SampleEntry& entry);
  /// Room for `samples` samples and `bytes` bytes of identities.
  void reserve(std::size_t samples, std::size_t bytes);
  /// Gives back the buffers' unused room (after the last add()).
  void shrink_to_fit();
  /// Replaces every label l by map[l] and names the classes (a listing that learns its
  /// class names only at the end: a manifest's sorted names). Throws
  /// std::invalid_argument for a label outside `map` or a mapped one outside `classes`.
  void remap_labels(std::span<const std::int64_t> map, std::vector<std::string> classes);

  std::size_t size() const { return identity_end_.size(); }
  bool empty() const { return size() == 0; }
  const std::string& root() const { return root_; }

  std::string_view identity(std::size_t i) const;
  /// The file to read (root/identity, or the identity if absolute; a member's container).
  std::string path(std::size_t i) const;
  SampleLocation location(std::size_t i) const;

  bool labelled() const { return !labels_.empty(); }
  /// Sample i's label; labelled() datasets only (else std::logic_error).
  std::int64_t label(std::size_t i) const;
  const std::vector<std::string>& classes() const { return classes_; }

  const std::vector<std::string>& meta_columns() const { return meta_names_; }
  std::string_view meta(std::size_t i, std::size_t column) const;

  /// A joined dataset's sources, in id order (empty when not joined).
  const std::vector<DatasetSource>& sources() const { return sources_; }
  /// The source of sample i (0 when not joined).
  std::uint32_t source_of(std::size_t i) const;

  /// The containers' paths as given to add_container (containers().size() of them).
  const std::vector<std::string>& containers() const { return containers_; }
  /// The container of member i (std::logic_error for a file: no container).
  std::uint32_t container_of(std::size_t i) const;

  /// A hash of the identities in id order (actors::hash_sample_identities of them), and
  /// of the classes and labels when labelled: DatasetFingerprint::identity_hash. A
  /// joined dataset's: of its sources' names, sizes and identity hashes.
  std::uint64_t identity_hash() const;

 private:
  std::string resolve(std::string_view path, const std::string& root) const;
  const std::string& root_of(std::size_t i) const;
  static constexpr std::uint32_t kNoContainer = ~std::uint32_t{0};

  std::string root_;
  std::string identities_;                   // packed
  std::vector<std::uint64_t> identity_end_;  // identity i ends here
  std::vector<std::int64_t> labels_;
  std::vector<std::string> classes_;
  std::vector<std::string> meta_names_;
  std::vector<std::string> meta_values_;              // per column, packed
  std::vector<std::vector<std::uint64_t>> meta_end_;  // per column
  std::vector<std::string> containers_;
  // Empty, or one per sample: kNoContainer for a file (a joined dataset's file source).
  std::vector<std::uint32_t> member_container_;
  std::vector<std::uint64_t> member_offset_, member_size_;
  std::vector<DatasetSource> sources_;
  std::vector<std::string> source_roots_;  // one per source
};

}  // namespace brigade::launch
