#include <gtest/gtest.h>

#include "transport/storage/object_store.h"

namespace brigade::transport {
namespace {

TEST(ObjectUrl, ParsesS3BucketAndKey) {
  ObjectUrl url = ObjectUrl::parse("s3://my-bucket.v2/train/a b/000001.jpg");
  EXPECT_EQ(url.scheme, ObjectUrl::Scheme::s3);
  EXPECT_EQ(url.bucket, "my-bucket.v2");
  EXPECT_EQ(url.key, "train/a b/000001.jpg");
  EXPECT_EQ(url.str(), "s3://my-bucket.v2/train/a b/000001.jpg");
  EXPECT_EQ(ObjectUrl::parse("s3://bucket").key, "");
  EXPECT_EQ(ObjectUrl::parse("s3://bucket/").key, "");
}

TEST(ObjectUrl, ParsesHttpsPathAndQueryAsGiven) {
  ObjectUrl url =
      ObjectUrl::parse("https://cdn.example.com:8443/d/x%20y.tar?X-Amz-Signature=abc&a=1");
  EXPECT_EQ(url.scheme, ObjectUrl::Scheme::https);
  EXPECT_EQ(url.authority, "cdn.example.com:8443");
  EXPECT_EQ(url.key, "/d/x%20y.tar");
  EXPECT_EQ(url.query, "X-Amz-Signature=abc&a=1");
  EXPECT_EQ(ObjectUrl::parse("http://127.0.0.1:9000").key, "/");
}

TEST(ObjectUrl, RefusesWhatIsNotAnObjectUrl) {
  for (const char* text :
       {"/data/train", "ftp://host/x", "s3://", "s3://ab/x", "s3://Upper/x", "s3://under_score/x",
        "https:///path", "https://user@host/x", "https://h/x#frag"}) {
    try {
      ObjectUrl::parse(text);
      ADD_FAILURE() << text;
    } catch (const StorageError& error) {
      EXPECT_EQ(error.code(), StorageErrc::invalid_url) << text;
      EXPECT_EQ(error.url(), text);
    }
  }
}

TEST(StorageErrc, TransientCodesMapOntoGenericConditions) {
  EXPECT_EQ(make_error_code(StorageErrc::throttled), std::errc::resource_unavailable_try_again);
  EXPECT_EQ(make_error_code(StorageErrc::server_error), std::errc::resource_unavailable_try_again);
  EXPECT_EQ(make_error_code(StorageErrc::timed_out), std::errc::timed_out);
  EXPECT_EQ(make_error_code(StorageErrc::connection_lost), std::errc::connection_reset);
  EXPECT_EQ(make_error_code(StorageErrc::not_found), std::errc::no_such_file_or_directory);
  EXPECT_EQ(make_error_code(StorageErrc::access_denied), std::errc::permission_denied);
  EXPECT_EQ(make_error_code(StorageErrc::short_body), std::errc::bad_message);
  EXPECT_EQ(std::string(storage_category().name()), "brigade.storage");
  EXPECT_EQ(make_error_code(StorageErrc::not_found).message(), "not_found");
}

}  // namespace
}  // namespace brigade::transport
