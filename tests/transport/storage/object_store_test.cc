// ObjectStore against a real S3-compatible server (s3rver from npm) started by
// s3_fixture.py on 127.0.0.1, directly and through its fault-injecting proxy.
//
// s3rver 3.7 refuses an unknown access key id, a malformed Authorization header, a missing
// x-amz-content-sha256 and a date off by more than 15 minutes, but it does not verify SigV4
// signatures (a wrong secret is accepted), and no S3 server from Debian or npm that runs
// here does. The server proves the protocol (listing pages, ranges, errors, retries); the
// signature is proven by sigv4_test.cc (the AWS SigV4 test-suite vectors, SigV4Suite.*, and
// the S3 documentation's examples) and, on live requests, by the fixture's proxy, which
// recomputes every signature it forwards with botocore's signer (an implementation
// independent of ours; not a server's check) and refuses a mismatch.
#include "transport/storage/object_store.h"

#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <stop_token>
#include <thread>

#include "tests/transport/storage/s3_server.h"

extern char** environ;

namespace brigade::transport {
namespace {

using test::S3Server;

std::vector<std::byte> file_bytes(const std::filesystem::path& path, std::uint64_t offset = 0,
                                  std::uint64_t size = ~0ULL) {
  std::ifstream file(path, std::ios::binary);
  file.seekg(static_cast<std::streamoff>(offset));
  std::vector<std::byte> out(
      std::min<std::uint64_t>(size, std::filesystem::file_size(path) - offset));
  file.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size()));
  return out;
}

// One server for the suite.
class ObjectStoreTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    mirror_ = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                        ("brigade-s3-" + std::to_string(::getpid())));
    std::filesystem::create_directories(*mirror_);
    server_ = new S3Server(BRIGADE_S3_FIXTURE, *mirror_);
  }
  static void TearDownTestSuite() {
    delete server_;
    std::filesystem::remove_all(*mirror_);
    delete mirror_;
  }
  void SetUp() override {
    if (!server_->ready()) {
      GTEST_SKIP() << "the S3 test server could not be started: " << server_->why_not();
    }
  }
  static StoreOptions options(const std::string& endpoint_name = "endpoint") {
    StoreOptions options;
    options.endpoint = (*server_)[endpoint_name];
    options.credentials = Credentials{(*server_)["key_id"], (*server_)["secret"], {}};
    options.backoff = std::chrono::milliseconds(1);
    return options;
  }
  static std::string url(const std::string& key) {
    return "s3://" + (*server_)["bucket"] + "/" + key;
  }
  static std::filesystem::path local(const std::string& key) { return *mirror_ / key; }

  static inline std::filesystem::path* mirror_ = nullptr;
  static inline S3Server* server_ = nullptr;
};

TEST_F(ObjectStoreTest, ListsEveryPageSortedByKey) {
  StoreOptions paged = options();
  paged.list_page_size = 4;
  ObjectStore store(paged);
  std::vector<ObjectEntry> entries = store.list(url("train/"));
  std::vector<std::string> expected;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(local("train"))) {
    if (entry.is_regular_file())
      expected.push_back(entry.path().lexically_relative(*mirror_).string());
  }
  std::sort(expected.begin(), expected.end());
  ASSERT_EQ(entries.size(), expected.size());
  ASSERT_EQ(expected.size(), 26u);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    EXPECT_EQ(entries[i].key, expected[i]);
    EXPECT_EQ(entries[i].size, std::filesystem::file_size(local(expected[i])));
    EXPECT_FALSE(entries[i].etag.empty());
  }
  EXPECT_EQ(store.stats().requests, 7u);            // 26 keys, 4 a page
  EXPECT_EQ(store.list(url("train")).size(), 26u);  // a prefix, not a folder
  EXPECT_TRUE(store.list(url("train/class_c/")).empty());
}

TEST_F(ObjectStoreTest, RangeReadsAreByteIdenticalToTheFile) {
  ObjectStore store(options());
  const std::uint64_t size = std::filesystem::file_size(local("big.bin"));
  for (auto [offset, length] : std::vector<std::pair<std::uint64_t, std::uint64_t>>{
           {0, 2}, {1, 1}, {12345, 100000}, {size - 1000, 1000}, {size - 1, 1}, {0, size}}) {
    EXPECT_EQ(store.get(url("big.bin"), offset, length),
              file_bytes(local("big.bin"), offset, length))
        << offset << "+" << length;
  }
  EXPECT_EQ(store.get(url("big.bin")), file_bytes(local("big.bin")));
  EXPECT_EQ(store.get(url("train/class_b/012.bin")), file_bytes(local("train/class_b/012.bin")));
  ObjectInfo info = store.head(url("big.bin"));
  EXPECT_EQ(info.size, size);
  EXPECT_EQ(info.etag.front(), '"');
  EXPECT_TRUE(store.get(url("big.bin"), 5, 0).empty());
}

TEST_F(ObjectStoreTest, RangeBeyondTheEndIsOutOfRange) {
  ObjectStore store(options());
  const std::uint64_t size = std::filesystem::file_size(local("big.bin"));
  for (std::uint64_t offset : {size - 10, size + 10}) {
    try {
      store.get(url("big.bin"), offset, 100);
      ADD_FAILURE() << "no error at " << offset;
    } catch (const StorageError& error) {
      EXPECT_EQ(error.code(), StorageErrc::out_of_range) << error.what();
      EXPECT_EQ(error.url(), url("big.bin"));
    }
  }
}

// s3rver 3.7 answers "Range: bytes=0-0" with the whole object (it reads the range's end
// as `end || Infinity`) and a Content-Range saying so: the client refuses an answer that
// is not the range it asked for rather than cutting it.
TEST_F(ObjectStoreTest, AnswerOtherThanTheRangeAskedIsRefused) {
  ObjectStore store(options());
  try {
    store.get(url("big.bin"), 0, 1);
    FAIL() << "no error";
  } catch (const StorageError& error) {
    EXPECT_EQ(error.code(), StorageErrc::out_of_range) << error.what();
    EXPECT_NE(std::string(error.what()).find("bytes 0-0"), std::string::npos) << error.what();
  }
  EXPECT_EQ(store.stats().retries, 0u);
}

TEST_F(ObjectStoreTest, MissingObjectIsNotFoundNamedWithItsUrl) {
  ObjectStore store(options());
  try {
    store.get(url("train/class_a/nope.bin"), 0, 10);
    FAIL() << "no error";
  } catch (const StorageError& error) {
    EXPECT_EQ(error.code(), StorageErrc::not_found);
    EXPECT_EQ(error.code(), std::errc::no_such_file_or_directory);
    EXPECT_EQ(error.http_status(), 404);
    EXPECT_EQ(error.server_code(), "NoSuchKey");
    EXPECT_NE(std::string(error.what()).find(url("train/class_a/nope.bin")), std::string::npos)
        << error.what();
  }
  EXPECT_EQ(store.stats().retries, 0u);
}

TEST_F(ObjectStoreTest, UnknownAccessKeyIsAccessDeniedWithoutTheSecret) {
  StoreOptions unknown = options();
  const std::string secret = "s3cr3t-value-that-must-not-leak";
  unknown.credentials = Credentials{"AKIAUNKNOWNBRIGADE00", secret, {}};
  ObjectStore store(unknown);
  for (auto call : {+[](ObjectStore&s, const std::string&u) { s.get(u, 0, 10); },
                    +[](ObjectStore&s, const std::string&u) { s.list(u); }}) {
    try {
      call(store, url("train/"));
      ADD_FAILURE() << "no error";
    } catch (const StorageError& error) {
      EXPECT_EQ(error.code(), StorageErrc::access_denied);
      EXPECT_EQ(error.server_code(), "InvalidAccessKeyId");
      EXPECT_EQ(std::string(error.what()).find(secret), std::string::npos) << error.what();
      EXPECT_EQ(std::string(error.what()).find("Signature="), std::string::npos) << error.what();
    }
  }
}

// Through the proxy every signature is recomputed by botocore from the request as S3
// canonicalizes it: listings whose continuation tokens hold '+', '/' and '=', keys that need
// encoding, a range read and a head are all accepted, each one checked; one bit off in the
// secret is refused (SignatureDoesNotMatch), the secret never named.
TEST_F(ObjectStoreTest, SignaturesMatchAnIndependentSigner) {
  StoreOptions proxied = options("proxy");
  proxied.list_page_size = 2;
  ObjectStore store(proxied);
  const std::uint64_t before = server_->checked();
  std::vector<ObjectEntry> odd = store.list(url("odd/"));
  ASSERT_EQ(odd.size(), 3u);
  for (const auto& entry : odd) EXPECT_EQ(store.get(url(entry.key)), file_bytes(local(entry.key)));
  EXPECT_EQ(store.list(url("train/class_a/")).size(), 13u);
  EXPECT_EQ(store.get(url("big.bin"), 99, 999), file_bytes(local("big.bin"), 99, 999));
  EXPECT_EQ(store.head(url("manifest.jsonl")).size,
            std::filesystem::file_size(local("manifest.jsonl")));
  EXPECT_EQ(store.stats().requests, 2u + 3u + 7u + 1u + 1u);
  EXPECT_EQ(server_->checked() - before, store.stats().requests);

  StoreOptions wrong = options("proxy");
  wrong.credentials->secret_access_key[0] ^= 1;
  ObjectStore refused(wrong);
  try {
    refused.head(url("big.bin"));
    FAIL() << "no error";
  } catch (const StorageError& error) {
    EXPECT_EQ(error.code(), StorageErrc::access_denied);
    EXPECT_EQ(error.http_status(), 403);
    EXPECT_EQ(std::string(error.what()).find(wrong.credentials->secret_access_key),
              std::string::npos)
        << error.what();
  }
  try {
    refused.get(url("big.bin"), 0, 10);
    FAIL() << "no error";
  } catch (const StorageError& error) {
    EXPECT_EQ(error.code(), StorageErrc::access_denied);
    EXPECT_EQ(error.server_code(), "SignatureDoesNotMatch");
  }
  EXPECT_EQ(refused.stats().retries, 0u);
}

TEST_F(ObjectStoreTest, HttpsCannotBeListed) {
  ObjectStore store(options());
  try {
    store.list("https://example.com/data/");
    FAIL() << "no error";
  } catch (const StorageError& error) {
    EXPECT_EQ(error.code(), StorageErrc::unsupported);
  }
}

TEST_F(ObjectStoreTest, RetriesThrottledAnswers) {
  ObjectStore store(options("proxy"));
  server_->arm("fail 2");
  EXPECT_EQ(store.get(url("big.bin"), 1000, 5000), file_bytes(local("big.bin"), 1000, 5000));
  EXPECT_EQ(store.stats().retries, 2u);
  EXPECT_EQ(store.stats().requests, 3u);
}

TEST_F(ObjectStoreTest, RetriesStalledRequests) {
  StoreOptions quick = options("proxy");
  quick.timeout = std::chrono::milliseconds(500);
  ObjectStore store(quick);
  server_->arm("stall 1");
  EXPECT_EQ(store.get(url("big.bin"), 7, 70000), file_bytes(local("big.bin"), 7, 70000));
  EXPECT_EQ(store.stats().retries, 1u);
}

// A stop requested while the proxy holds a request unanswered (a stall, kept until the
// fixture ends) ends the stream at once, `cancelled`, not retried: not after the
// request's timeout (a minute here), which would fail it `timed_out` and retry it.
TEST_F(ObjectStoreTest, AStoppedStreamIsCancelledWhileItsRequestIsStalled) {
  ObjectStore store(options("proxy"));
  const auto before = server_->traffic().first;
  server_->arm("stall 1");
  std::stop_source stop;
  std::uint64_t delivered = 0;
  auto stream = std::async(std::launch::async, [&] {
    store.get_stream(
        url("big.bin"), 0, 1000, [&](const std::byte*, std::size_t n) { delivered += n; }, 0, {},
        stop.get_token());
  });
  while (server_->traffic().first == before) {  // until the proxy holds the request
    ASSERT_NE(stream.wait_for(std::chrono::milliseconds(0)), std::future_status::ready);
  }
  stop.request_stop();
  try {
    stream.get();
    FAIL() << "no error";
  } catch (const StorageError& error) {
    EXPECT_EQ(error.code(), StorageErrc::cancelled) << error.what();
    EXPECT_EQ(error.code(), std::errc::operation_canceled);
  }
  EXPECT_EQ(delivered, 0u);
  EXPECT_EQ(store.stats().requests, 1u);
  EXPECT_EQ(store.stats().retries, 0u);
  // A stop already requested sends nothing.
  EXPECT_THROW(
      store.get_stream(
          url("big.bin"), 0, 10, [](const std::byte*, std::size_t) {}, 0, {}, stop.get_token()),
      StorageError);
  EXPECT_EQ(server_->traffic().first, before + 1);
}

TEST_F(ObjectStoreTest, RetriesConnectionsCutMidBody) {
  ObjectStore store(options("proxy"));
  server_->arm("drop 1");
  EXPECT_EQ(store.get(url("big.bin"), 0, 200000), file_bytes(local("big.bin"), 0, 200000));
  EXPECT_EQ(store.stats().retries, 1u);
}

// A streamed range: the sink sees each byte once, in order; an answer cut mid-body is
// asked again from the first byte not delivered (the proxy sends the rest only).
TEST_F(ObjectStoreTest, StreamedRangeResumesAfterAConnectionCutMidBody) {
  ObjectStore store(options("proxy"));
  const std::uint64_t offset = 1000, size = 2'000'000;
  const auto before = server_->traffic();
  server_->arm("drop 1");
  std::vector<std::byte> got;
  std::size_t pieces = 0;
  store.get_stream(url("big.bin"), offset, size, [&](const std::byte* data, std::size_t n) {
    got.insert(got.end(), data, data + n);
    ++pieces;
  });
  EXPECT_EQ(got, file_bytes(local("big.bin"), offset, size));
  EXPECT_GT(pieces, 1u);  // delivered as it arrived, not as one body
  EXPECT_EQ(store.stats().retries, 1u);
  const auto after = server_->traffic();
  EXPECT_EQ(after.first - before.first, 2u);
  EXPECT_LT(after.second - before.second, size);  // the rest, not the whole range again
  EXPECT_EQ(store.stats().bytes, size);
}

TEST_F(ObjectStoreTest, StreamedRangeOfAChangedObjectIsRefused) {
  ObjectStore store(options());
  const auto info = store.head(url("big.bin"));
  std::uint64_t delivered = 0;
  const auto sink = [&](const std::byte*, std::size_t n) { delivered += n; };
  try {
    store.get_stream(url("big.bin"), 0, 100, sink, info.size, "\"another-etag\"");
    FAIL() << "no error";
  } catch (const StorageError& error) {
    EXPECT_EQ(error.code(), StorageErrc::changed) << error.what();
    EXPECT_NE(std::string(error.what()).find(info.etag), std::string::npos) << error.what();
  }
  try {
    store.get_stream(url("big.bin"), 0, 100, sink, info.size + 1, info.etag);
    FAIL() << "no error";
  } catch (const StorageError& error) {
    EXPECT_EQ(error.code(), StorageErrc::changed) << error.what();
  }
  EXPECT_EQ(delivered, 0u);
  store.get_stream(url("big.bin"), 0, 100, sink, info.size, info.etag);
  EXPECT_EQ(delivered, 100u);
}

TEST_F(ObjectStoreTest, StreamedShortBodyIsAnError) {
  ObjectStore store(options("proxy"));
  server_->arm("short 1");
  std::uint64_t delivered = 0;
  try {
    store.get_stream(url("big.bin"), 100, 5000,
                     [&](const std::byte*, std::size_t n) { delivered += n; });
    FAIL() << "no error";
  } catch (const StorageError& error) {
    EXPECT_EQ(error.code(), StorageErrc::short_body) << error.what();
    EXPECT_NE(std::string(error.what()).find("4990 bytes"), std::string::npos) << error.what();
  }
  EXPECT_EQ(delivered, 4990u);
}

TEST_F(ObjectStoreTest, ShortBodyIsAnErrorNotATruncatedResult) {
  ObjectStore store(options("proxy"));
  server_->arm("short 1");
  try {
    store.get(url("big.bin"), 100, 5000);
    FAIL() << "no error";
  } catch (const StorageError& error) {
    EXPECT_EQ(error.code(), StorageErrc::short_body) << error.what();
    EXPECT_NE(std::string(error.what()).find("4990 bytes"), std::string::npos) << error.what();
  }
}

TEST_F(ObjectStoreTest, GivesUpAfterTheRetryBudgetNamingTheServerCode) {
  StoreOptions few = options("proxy");
  few.retries = 2;
  ObjectStore store(few);
  server_->arm("fail 3");
  try {
    store.get(url("big.bin"), 0, 10);
    FAIL() << "no error";
  } catch (const StorageError& error) {
    EXPECT_EQ(error.code(), StorageErrc::throttled);
    EXPECT_EQ(error.code(), std::errc::resource_unavailable_try_again);
    EXPECT_EQ(error.server_code(), "SlowDown");
    EXPECT_EQ(error.http_status(), 503);
    EXPECT_NE(std::string(error.what()).find(url("big.bin")), std::string::npos) << error.what();
  }
  EXPECT_EQ(store.stats().requests, 3u);
}

// Many threads on one store, at most 8 requests in flight for the host: every answer
// byte-identical. Prints range reads per second with 1 and 8 threads, straight to the
// server and through the proxy adding 20 ms per request (latency hidden by requests in
// flight); no bound is checked.
TEST_F(ObjectStoreTest, ConcurrentRangeReadsFromManyThreads) {
  const auto expected = file_bytes(local("big.bin"));
  constexpr std::uint64_t kRead = 64 << 10;
  const std::uint64_t slots = expected.size() / kRead;
  for (int latency_ms : {0, 20}) {
    StoreOptions limited = options(latency_ms ? "proxy" : "endpoint");
    limited.max_requests_per_host = 8;
    ObjectStore store(limited);
    server_->arm("latency " + std::to_string(latency_ms));
    for (int threads : {1, 8}) {
      constexpr int kReadsPerThread = 16;
      std::atomic<int> mismatches{0};
      auto start = std::chrono::steady_clock::now();
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
          for (int i = 0; i < kReadsPerThread; ++i) {
            std::uint64_t offset = ((t * 7 + i * 13) % slots) * kRead;
            auto bytes = store.get(url("big.bin"), offset, kRead);
            if (!std::equal(bytes.begin(), bytes.end(),
                            expected.begin() + static_cast<long>(offset))) {
              ++mismatches;
            }
          }
        });
      }
      for (auto& thread : pool) thread.join();
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      EXPECT_EQ(mismatches.load(), 0);
      std::cout << "[ figures  ] " << threads << " thread(s), " << latency_ms
                << " ms added: " << threads * kReadsPerThread / seconds
                << " range reads/s of 64 KiB (s3rver on 127.0.0.1, 8 per host)\n";
    }
  }
  server_->arm("latency 0");
}

TEST_F(ObjectStoreTest, UnreachableHostIsTransientRetriedThenNamed) {
  StoreOptions closed = options();
  closed.retries = 2;
  closed.endpoint = "http://127.0.0.1:1";  // tcpmux's port: nothing listens there
  ObjectStore store(closed);
  try {
    store.get(url("big.bin"), 0, 10);
    FAIL() << "no error";
  } catch (const StorageError& error) {
    EXPECT_EQ(error.code(), StorageErrc::unreachable) << error.what();
    EXPECT_EQ(error.code(), std::errc::connection_refused);
    EXPECT_NE(std::string(error.what()).find(url("big.bin")), std::string::npos) << error.what();
  }
  EXPECT_EQ(store.stats().requests, 3u);
  EXPECT_EQ(store.stats().retries, 2u);
}

// No options: keys, endpoint and region from the variables the AWS tools read.
TEST_F(ObjectStoreTest, TakesKeysAndEndpointFromTheEnvironment) {
  ::setenv("AWS_ACCESS_KEY_ID", (*server_)["key_id"].c_str(), 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", (*server_)["secret"].c_str(), 1);
  ::setenv("AWS_ENDPOINT_URL", (*server_)["endpoint"].c_str(), 1);
  ::setenv("AWS_REGION", "eu-central-1", 1);
  ObjectStore store;
  for (const char* name :
       {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_REGION"}) {
    ::unsetenv(name);
  }
  EXPECT_EQ(store.region(), "eu-central-1");
  EXPECT_EQ(store.head(url("big.bin")).size, std::filesystem::file_size(local("big.bin")));
}

// Keys with spaces, '+', '=', '&', '%', UTF-8 and parentheses, each segment encoded once:
// listed under a '/'-ending prefix and read back byte for byte, signed and unsigned
// (anonymous: s3rver lets unsigned requests read, as a public bucket does).
TEST_F(ObjectStoreTest, ReadsKeysThatNeedEncoding) {
  const std::vector<std::string> expected{"odd/%41.bin", "odd/a b+c=d&e.bin",
                                          "odd/\xc3\xa9t\xc3\xa9 2013/(1)~x_y-z.bin"};
  for (bool anonymous : {false, true}) {
    StoreOptions paged = options();
    paged.anonymous = anonymous;
    paged.list_page_size = 2;
    ObjectStore store(paged);
    std::vector<std::string> keys;
    for (const auto& entry : store.list(url("odd/"))) keys.push_back(entry.key);
    EXPECT_EQ(keys, expected) << "anonymous " << anonymous;
    for (const auto& key : keys) EXPECT_EQ(store.get(url(key)), file_bytes(local(key))) << key;
    EXPECT_EQ(store.list(url("odd/\xc3\xa9t\xc3\xa9 2013/")).size(), 1u);
    EXPECT_EQ(store.stats().requests, 2u + 3u + 1u);  // 3 keys 2 a page, 3 gets, 1 list
  }
}

// An unsigned http:// URL is sent as given (path-style on the server), and a redirect is
// followed.
TEST_F(ObjectStoreTest, ReadsPlainUrlsFollowingRedirects) {
  ObjectStore store(options());
  const std::string path = "/" + (*server_)["bucket"] + "/big.bin";
  EXPECT_EQ(store.get((*server_)["endpoint"] + path, 10, 1000),
            file_bytes(local("big.bin"), 10, 1000));
  server_->arm("redirect 1");
  EXPECT_EQ(store.get((*server_)["proxy"] + path, 4096, 5000),
            file_bytes(local("big.bin"), 4096, 5000));
  EXPECT_EQ(store.head((*server_)["proxy"] + path).size,
            std::filesystem::file_size(local("big.bin")));
}

// https: the fixture's proxy behind TLS with a certificate for 127.0.0.1 that is its own
// CA. Trusted through AWS_CA_BUNDLE (as the AWS tools take a private CA), signed S3
// requests, listings and plain https:// URLs read the same bytes as over http.
TEST_F(ObjectStoreTest, ReadsOverHttpsTrustingTheCaBundle) {
  if (!server_->has("tls_proxy")) GTEST_SKIP() << "no openssl to make the fixture's certificate";
  ::setenv("AWS_CA_BUNDLE", (*server_)["ca_file"].c_str(), 1);
  ObjectStore store(options("tls_proxy"));
  ::unsetenv("AWS_CA_BUNDLE");
  const auto checked = server_->checked();
  EXPECT_EQ(store.get(url("big.bin"), 100, 70000), file_bytes(local("big.bin"), 100, 70000));
  EXPECT_EQ(store.list(url("train/class_b/")).size(), 13u);
  EXPECT_EQ(server_->checked(), checked + 2);  // both signed requests went through TLS
  const std::string path = "/" + (*server_)["bucket"] + "/train/class_a/003.bin";
  EXPECT_EQ(store.get((*server_)["tls_proxy"] + path), file_bytes(local("train/class_a/003.bin")));
}

// An https server whose certificate nobody trusts is refused at once, named with the URL
// and the cause, and not retried (a certificate does not heal); nothing reaches S3.
TEST_F(ObjectStoreTest, AnUntrustedCertificateIsRefusedNamedAndNotRetried) {
  if (!server_->has("tls_proxy")) GTEST_SKIP() << "no openssl to make the fixture's certificate";
  ObjectStore store(options("tls_proxy"));
  const auto [requests, bytes] = server_->traffic();
  try {
    store.get(url("big.bin"), 0, 100);
    FAIL() << "an untrusted certificate was accepted";
  } catch (const StorageError& e) {
    EXPECT_EQ(e.code(), make_error_code(StorageErrc::tls_failed));
    EXPECT_NE(std::string(e.what()).find(url("big.bin")), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("certificate"), std::string::npos) << e.what();
  }
  EXPECT_EQ(store.stats().requests, 1u);
  EXPECT_EQ(store.stats().retries, 0u);
  EXPECT_EQ(server_->traffic().first, requests);  // no request was read by the proxy
}

}  // namespace
}  // namespace brigade::transport
