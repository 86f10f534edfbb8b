#include "launch/loader/dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "actors/sampler.h"
#include "launch/loader/object_reads.h"

namespace brigade::launch {

namespace {

std::string_view slice(const std::string& packed, const std::vector<std::uint64_t>& ends,
                       std::size_t i) {
  const std::uint64_t begin = i == 0 ? 0 : ends[i - 1];
  return std::string_view(packed).substr(begin, ends[i] - begin);
}

}  // namespace

Dataset::Dataset(std::string root) : root_(std::move(root)) {}

void Dataset::set_meta_columns(std::vector<std::string> names) {
  if (!empty()) throw std::logic_error("Dataset::set_meta_columns after add()");
  meta_names_ = std::move(names);
  meta_values_.assign(meta_names_.size(), {});
  meta_end_.assign(meta_names_.size(), {});
}

void Dataset::set_classes(std::vector<std::string> classes) {
  for (const auto label : labels_) {
    if (static_cast<std::uint64_t>(label) >= classes.size())
      throw std::invalid_argument("label " + std::to_string(label) + " is not a class of " +
                                  std::to_string(classes.size()));
  }
  classes_ = std::move(classes);
}

std::uint32_t Dataset::add_container(std::string_view path) {
  containers_.emplace_back(path);
  return static_cast<std::uint32_t>(containers_.size() - 1);
}

std::uint64_t Dataset::add(const SampleEntry& e) {
  const bool first = empty();
  if (!first && e.label.has_value() != labelled())
    throw std::invalid_argument(labelled() ? "no label, where the other samples have one"
                                           : "a label, where the other samples have none");
  if (e.label && *e.label < 0)
    throw std::invalid_argument("label " + std::to_string(*e.label) + " is negative");
  if (e.label && !classes_.empty() && static_cast<std::uint64_t>(*e.label) >= classes_.size())
    throw std::invalid_argument("label " + std::to_string(*e.label) + " is not a class of " +
                                std::to_string(classes_.size()));
  if (!first && e.member.has_value() != !member_container_.empty())
    throw std::invalid_argument("a dataset's samples are all members of containers, or none");
  if (e.member && e.member->container >= containers_.size())
    throw std::invalid_argument("member of unknown container " +
                                std::to_string(e.member->container));
  if (e.meta.size() != meta_names_.size())
    throw std::invalid_argument(std::to_string(e.meta.size()) + " metadata values for " +
                                std::to_string(meta_names_.size()) + " columns");
  identities_.append(e.identity);
  identity_end_.push_back(identities_.size());
  if (e.label) labels_.push_back(*e.label);
  if (e.member) {
    member_container_.push_back(e.member->container);
    member_offset_.push_back(e.member->offset);
    member_size_.push_back(e.member->size);
  }
  for (std::size_t c = 0; c < e.meta.size(); ++c) {
    meta_values_[c].append(e.meta[c]);
    meta_end_[c].push_back(meta_values_[c].size());
  }
  return size() - 1;
}

void Dataset::reserve(std::size_t samples, std::size_t bytes) {
  identity_end_.reserve(samples);
  identities_.reserve(bytes);
}

void Dataset::shrink_to_fit() {
  identities_.shrink_to_fit();
  identity_end_.shrink_to_fit();
  labels_.shrink_to_fit();
  for (auto& v : meta_values_) v.shrink_to_fit();
  for (auto& e : meta_end_) e.shrink_to_fit();
}

void Dataset::remap_labels(std::span<const std::int64_t> map, std::vector<std::string> classes) {
  for (auto& label : labels_) {
    if (static_cast<std::uint64_t>(label) >= map.size())
      throw std::invalid_argument("label " + std::to_string(label) + " has no mapping");
    const auto to = map[static_cast<std::size_t>(label)];
    if (to < 0 || static_cast<std::uint64_t>(to) >= classes.size())
      throw std::invalid_argument("label " + std::to_string(to) + " is not a class of " +
                                  std::to_string(classes.size()));
    label = to;
  }
  classes_ = std::move(classes);
}

std::string_view Dataset::identity(std::size_t i) const {
  return slice(identities_, identity_end_, i);
}

std::string Dataset::resolve(std::string_view path, const std::string& root) const {
  if (root.empty() || (!path.empty() && path.front() == '/') || is_object_url(path))
    return std::string(path);
  if (is_object_url(root))
    return root.ends_with('/') ? root + std::string(path) : root + "/" + std::string(path);
  return (std::filesystem::path(root) / path).string();
}

const std::string& Dataset::root_of(std::size_t i) const {
  return sources_.empty() ? root_ : source_roots_[source_of(i)];
}

std::uint32_t Dataset::source_of(std::size_t i) const {
  if (sources_.empty()) return 0;
  const auto it = std::upper_bound(sources_.begin(), sources_.end(), i,
                                   [](std::size_t id, const auto& s) { return id < s.offset; });
  return static_cast<std::uint32_t>(it - sources_.begin() - 1);
}

std::string Dataset::path(std::size_t i) const {
  if (!member_container_.empty() && member_container_[i] != kNoContainer) {
    // A joined dataset's containers are stored resolved (join()).
    return sources_.empty() ? resolve(containers_[member_container_[i]], root_)
                            : containers_[member_container_[i]];
  }
  return resolve(identity(i), root_of(i));
}

SampleLocation Dataset::location(std::size_t i) const {
  if (member_container_.empty() || member_container_[i] == kNoContainer) return {.path = path(i)};
  return {.path = path(i), .offset = member_offset_[i], .size = member_size_[i]};
}

std::uint32_t Dataset::container_of(std::size_t i) const {
  if (member_container_.empty() || member_container_[i] == kNoContainer)
    throw std::logic_error("Dataset::container_of: sample " + std::to_string(i) +
                           " is a file, not a member");
  return member_container_[i];
}

Dataset Dataset::join(std::vector<Dataset> parts, std::vector<std::string> names) {
  if (parts.empty() || parts.size() != names.size())
    throw std::invalid_argument("Dataset::join: one name per source, at least one source");
  Dataset out;
  out.meta_names_ = parts.front().meta_names_;
  out.meta_values_.assign(out.meta_names_.size(), {});
  out.meta_end_.assign(out.meta_names_.size(), {});
  const bool labelled = parts.front().labelled();
  bool members = false;
  for (const auto& p : parts) members = members || !p.member_container_.empty();
  for (std::size_t s = 0; s < parts.size(); ++s) {
    const Dataset& p = parts[s];
    const auto where = "source " + std::to_string(s) + " (" + names[s] + "): ";
    if (p.empty()) throw std::invalid_argument(where + "no samples");
    if (p.labelled() != labelled) {
      throw std::invalid_argument(where + (labelled ? "has no labels, where source 0 has"
                                                    : "has labels, where source 0 has none"));
    }
    if (p.meta_names_ != out.meta_names_)
      throw std::invalid_argument(where + "other metadata columns than source 0's");
    out.sources_.push_back({.name = names[s],
                            .offset = out.size(),
                            .size = p.size(),
                            .classes = p.classes_,
                            .identity_hash = p.identity_hash(),
                            .first_container = static_cast<std::uint32_t>(out.containers_.size()),
                            .containers = static_cast<std::uint32_t>(p.containers_.size())});
    out.source_roots_.push_back(p.root_);
    const auto first_container = static_cast<std::uint32_t>(out.containers_.size());
    for (const auto& c : p.containers_) out.containers_.push_back(p.resolve(c, p.root_));
    const std::uint64_t base = out.identities_.size();
    out.identities_ += p.identities_;
    for (const auto end : p.identity_end_) out.identity_end_.push_back(base + end);
    out.labels_.insert(out.labels_.end(), p.labels_.begin(), p.labels_.end());
    for (std::size_t c = 0; c < out.meta_names_.size(); ++c) {
      const std::uint64_t meta_base = out.meta_values_[c].size();
      out.meta_values_[c] += p.meta_values_[c];
      for (const auto end : p.meta_end_[c]) out.meta_end_[c].push_back(meta_base + end);
    }
    if (!members) continue;
    for (std::size_t i = 0; i < p.size(); ++i) {
      const bool member = !p.member_container_.empty();
      out.member_container_.push_back(member ? first_container + p.member_container_[i]
                                             : kNoContainer);
      out.member_offset_.push_back(member ? p.member_offset_[i] : 0);
      out.member_size_.push_back(member ? p.member_size_[i] : 0);
    }
  }
  return out;
}

std::int64_t Dataset::label(std::size_t i) const {
  if (!labelled()) throw std::logic_error("Dataset::label: the dataset has no labels");
  return labels_[i];
}

std::string_view Dataset::meta(std::size_t i, std::size_t column) const {
  return slice(meta_values_[column], meta_end_[column], i);
}

std::uint64_t Dataset::identity_hash() const {
  if (!sources_.empty()) {
    actors::IdentityHasher h(sources_.size());
    for (const auto& s : sources_)
      h.add(fmt::format("{}\n{}\n{:016x}", s.name, s.size, s.identity_hash));
    return h.value();
  }
  actors::IdentityHasher h(size());
  for (std::size_t i = 0; i < size(); ++i) h.add(identity(i));
  if (!labelled()) return h.value();
  // A labelled dataset: the classes and each label (8 bytes, little-endian) after the
  // identities.
  h.add("classes");
  for (const auto& c : classes_) h.add(c);
  h.add("labels");
  for (const auto label : labels_) {
    char bytes[8];
    for (int b = 0; b < 8; ++b)
      bytes[b] = static_cast<char>(static_cast<std::uint64_t>(label) >> (8 * b));
    h.add(std::string_view(bytes, 8));
  }
  return h.value();
}

}  // namespace brigade::launch
