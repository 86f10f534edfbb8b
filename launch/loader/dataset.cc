#include "launch/loader/dataset.h"

#include <filesystem>
#include <stdexcept>
#include <string>

#include "actors/sampler.h"

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

std::string Dataset::resolve(std::string_view path) const {
  if (root_.empty() || (!path.empty() && path.front() == '/')) return std::string(path);
  return (std::filesystem::path(root_) / path).string();
}

std::string Dataset::path(std::size_t i) const {
  if (!member_container_.empty()) return resolve(containers_[member_container_[i]]);
  return resolve(identity(i));
}

SampleLocation Dataset::location(std::size_t i) const {
  if (member_container_.empty()) return {.path = path(i)};
  return {.path = path(i), .offset = member_offset_[i], .size = member_size_[i]};
}

std::uint32_t Dataset::container_of(std::size_t i) const {
  if (member_container_.empty())
    throw std::logic_error("Dataset::container_of: the samples are files, not members");
  return member_container_[i];
}

std::int64_t Dataset::label(std::size_t i) const {
  if (!labelled()) throw std::logic_error("Dataset::label: the dataset has no labels");
  return labels_[i];
}

std::string_view Dataset::meta(std::size_t i, std::size_t column) const {
  return slice(meta_values_[column], meta_end_[column], i);
}

std::uint64_t Dataset::identity_hash() const {
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
