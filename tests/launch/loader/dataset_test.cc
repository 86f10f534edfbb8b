#include "launch/loader/dataset.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "actors/sampler.h"

namespace brigade::launch {
namespace {

TEST(Dataset, RelativeIdentitiesResolveUnderTheRootAndAbsoluteOnesStay) {
  Dataset d("/data/train");
  d.add({.identity = "cat/1.jpg"});
  d.add({.identity = "/elsewhere/2.jpg"});
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d.identity(0), "cat/1.jpg");
  EXPECT_EQ(d.path(0), "/data/train/cat/1.jpg");
  EXPECT_EQ(d.path(1), "/elsewhere/2.jpg");
  EXPECT_EQ(d.location(1), (SampleLocation{.path = "/elsewhere/2.jpg"}));
  EXPECT_FALSE(d.labelled());
  EXPECT_THROW(d.label(0), std::logic_error);
}

TEST(Dataset, IdentityHashOfAnUnlabelledSetIsTheSamplersHashOfItsIdentities) {
  Dataset d;
  const std::vector<std::string> ids{"a.jpg", "b/c.png", ""};
  for (const auto& s : ids) d.add({.identity = s});
  EXPECT_EQ(d.identity_hash(), actors::hash_sample_identities(ids));
}

TEST(Dataset, LabelsAndClassesChangeTheIdentityHash) {
  const auto make = [](std::vector<std::int64_t> labels, std::vector<std::string> classes) {
    Dataset d;
    d.set_classes(std::move(classes));
    for (std::size_t i = 0; i < labels.size(); ++i)
      d.add({.identity = "x" + std::to_string(i), .label = labels[i]});
    return d;
  };
  const auto base = make({0, 1}, {"cat", "dog"});
  EXPECT_TRUE(base.labelled());
  EXPECT_EQ(base.label(1), 1);
  EXPECT_EQ(base.identity_hash(), make({0, 1}, {"cat", "dog"}).identity_hash());
  EXPECT_NE(base.identity_hash(), make({1, 0}, {"cat", "dog"}).identity_hash());
  EXPECT_NE(base.identity_hash(), make({0, 1}, {"cat", "wolf"}).identity_hash());
  Dataset unlabelled;
  unlabelled.add({.identity = "x0"});
  unlabelled.add({.identity = "x1"});
  EXPECT_NE(base.identity_hash(), unlabelled.identity_hash());
}

TEST(Dataset, RefusesMixedLabellingNegativeOrUnknownLabels) {
  Dataset d;
  d.set_classes({"a", "b"});
  d.add({.identity = "1", .label = 1});
  EXPECT_THROW(d.add({.identity = "2"}), std::invalid_argument);
  EXPECT_THROW(d.add({.identity = "3", .label = -1}), std::invalid_argument);
  EXPECT_THROW(d.add({.identity = "4", .label = 2}), std::invalid_argument);
  EXPECT_EQ(d.size(), 1u);
  Dataset plain;
  plain.add({.identity = "1"});
  EXPECT_THROW(plain.add({.identity = "2", .label = 0}), std::invalid_argument);
}

TEST(Dataset, MembersLocateAByteRangeOfTheirContainer) {
  Dataset d("/shards");
  const auto tar = d.add_container("train-000000.tar");
  d.add({.identity = "train-000000.tar/0001.jpg", .member = MemberRange{tar, 512, 1000}});
  EXPECT_EQ(d.location(0),
            (SampleLocation{.path = "/shards/train-000000.tar", .offset = 512, .size = 1000}));
  EXPECT_THROW(d.add({.identity = "loose.jpg"}), std::invalid_argument);
  EXPECT_THROW(d.add({.identity = "x", .member = MemberRange{7, 0, 1}}), std::invalid_argument);
}

TEST(Dataset, MetadataColumnsHoldOneValuePerSample) {
  Dataset d;
  d.set_meta_columns({"caption", "width"});
  const std::vector<std::string_view> first{"a cat", "640"}, second{"", "320"};
  d.add({.identity = "1", .meta = first});
  d.add({.identity = "2", .meta = second});
  EXPECT_EQ(d.meta(0, 0), "a cat");
  EXPECT_EQ(d.meta(1, 0), "");
  EXPECT_EQ(d.meta(1, 1), "320");
  const std::vector<std::string_view> short_row{"only one"};
  EXPECT_THROW(d.add({.identity = "3", .meta = short_row}), std::invalid_argument);
  EXPECT_THROW(d.set_meta_columns({"late"}), std::logic_error);
}

}  // namespace
}  // namespace brigade::launch
