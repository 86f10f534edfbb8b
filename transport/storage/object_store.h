#pragma once
// Objects read over HTTP(S): S3 and S3-compatible stores (`s3://bucket/key`, signed with
// AWS Signature Version 4) and plain web servers (`https://host/path`: public objects and
// presigned URLs, sent as given, unsigned; redirects followed, at most 5). The room is a
// client only: it knows no manifest, shard or sample (launch/loader/ decides what to read).
//
// CREDENTIALS, REGION, ENDPOINT are found as the AWS tools find them, once, when the store
// is made (see StoreOptions): AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
// AWS_SESSION_TOKEN; else AWS_PROFILE's (default "default") section of
// ~/.aws/credentials and ~/.aws/config (AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE);
// AWS_REGION, AWS_DEFAULT_REGION or the profile's `region` (default us-east-1);
// AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or the profile's `endpoint_url`; the certificates
// trusted for https (a private CA) from AWS_CA_BUNDLE or the profile's `ca_bundle`, else
// the system's store (certificate and host name are always checked). With an endpoint
// the bucket is addressed path-style (http://host:port/bucket/key, what S3-compatible
// stores expect); without one, virtual-hosted (https://bucket.s3.<region>.amazonaws.com).
// A secret never appears in a message, log line or what() string.
//
// ERRORS are converted once, here: every failure is a StorageError whose code is a
// StorageErrc (storage_category(), "brigade.storage") and whose message names the URL
// and, when the server sent one, its error code (`NoSuchKey`, `SlowDown`, …). Transient
// codes map onto the generic conditions actors::is_transient() recognizes; the store has
// already retried them (StoreOptions::retries) before it throws.
//
// THREADS. An ObjectStore is safe to call from many threads at once (the io stage calls
// it from up to `read_concurrency` threads); each call blocks its thread. Each host has a
// pool of libcurl handles, so connections (and TLS sessions) are reused, and at most
// `max_requests_per_host` requests in flight: further callers wait for a free slot.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace brigade::transport {

/// Codes of StorageError. Transient (a retry may help): throttled, server_error,
/// timed_out, connection_lost, unreachable. Permanent: the rest.
enum class StorageErrc {
  throttled = 1,    // 429, 503, or the server's SlowDown: resource_unavailable_try_again
  server_error,     // another 5xx: resource_unavailable_try_again
  timed_out,        // no answer within StoreOptions::timeout: timed_out
  connection_lost,  // reset, closed mid-body: connection_reset
  unreachable,      // connection refused, name not resolved: connection_refused
  not_found,        // 404, NoSuchKey, NoSuchBucket: no_such_file_or_directory
  access_denied,    // 401, 403 (InvalidAccessKeyId, SignatureDoesNotMatch): permission_denied
  bad_request,      // another 4xx: invalid_argument
  out_of_range,     // a range beyond the object's end (416): result_out_of_range
  short_body,       // fewer (or more) bytes than Content-Range/Content-Length said: bad_message
  bad_response,     // a reply this client cannot read (no Content-Range, bad XML): bad_message
  invalid_url,      // not s3://bucket/key, http:// or https://: invalid_argument
  unsupported,      // e.g. listing an https:// URL: operation_not_supported
  tls_failed,       // certificate or handshake refused: permission_denied
  changed,          // another ETag or size than the caller knew the object by: bad_message
  cancelled,        // the caller's stop token was requested mid-request: operation_canceled
};

const std::error_category& storage_category() noexcept;
std::error_code make_error_code(StorageErrc code) noexcept;
std::string_view storage_code_name(StorageErrc code);  // "not_found"

/// What every call throws. what(): "<what failed> <url>: <server code> (HTTP <status>)
/// <server message>"; never a secret or a signature.
class StorageError : public std::system_error {
 public:
  StorageError(StorageErrc code, std::string url, const std::string& what,
               std::string server_code = {}, int http_status = 0);
  const std::string& url() const noexcept { return url_; }
  const std::string& server_code() const noexcept { return server_code_; }  // "NoSuchKey"
  int http_status() const noexcept { return http_status_; }                 // 0: none
  StorageErrc storage_code() const noexcept { return static_cast<StorageErrc>(code().value()); }

 private:
  std::string url_;
  std::string server_code_;
  int http_status_ = 0;
};

/// A parsed object URL. s3://bucket/key (the key is everything after the bucket's
/// slash, unencoded, possibly empty: a prefix); http(s)://host[:port]/path[?query] (path
/// and query kept as given, already percent-encoded).
struct ObjectUrl {
  enum class Scheme { s3, http, https };
  Scheme scheme = Scheme::s3;
  std::string bucket;     // s3 only
  std::string authority;  // http(s) only: host[:port]
  std::string key;        // s3: the key; http(s): the path, with its leading '/'
  std::string query;      // http(s) only, without '?'

  /// Throws StorageError(invalid_url) when `url` is none of the above (another scheme,
  /// no bucket, a bucket name S3 would refuse, a fragment).
  static ObjectUrl parse(std::string_view url);
  std::string str() const;  // back to the URL's text (s3://bucket/key, https://…)
};

/// AWS credentials. Copied into the store; never printed (operator<< is not defined).
struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty: none
};

struct StoreOptions {
  /// Set: these instead of what the environment and profile say (tests, embedders).
  std::optional<Credentials> credentials{};
  std::optional<std::string> region{};
  std::optional<std::string> endpoint{};  // "http://127.0.0.1:9000": path-style
  bool anonymous = false;  // unsigned requests (public buckets), ignoring any credentials
  int retries = 4;         // transient failures retried this often, then thrown
  std::chrono::milliseconds timeout{60'000};  // one request's whole time, connect included
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds backoff{100};         // first retry's delay before jitter;
  std::chrono::milliseconds max_backoff{10'000};  // doubles per retry up to this
  int max_requests_per_host = 16;
  bool verify_tls = true;     // certificate and host name checks; off only for tests
  std::string ca_file{};      // empty: AWS_CA_BUNDLE / the profile's ca_bundle, else the system's
  int list_page_size = 1000;  // ListObjectsV2 max-keys
};

struct ObjectInfo {
  std::uint64_t size = 0;
  std::string etag;  // as the server sent it, quotes included
};

struct ObjectEntry {
  std::string key;  // the whole key, bucket not included
  std::uint64_t size = 0;
  std::string etag;
};

/// One host's counters (StoreStats::hosts).
struct HostStats {
  std::string host;            // the pool's key: scheme://host:port
  std::uint64_t requests = 0;  // attempts sent, retries included
  std::uint64_t retries = 0;   // attempts after a transient failure
  std::uint64_t failures = 0;  // calls that threw (a permanent error, or retries spent)
  std::uint64_t bytes = 0;     // body bytes received
};

/// Counters since the store was made (a snapshot, not a transaction).
struct StoreStats {
  std::uint64_t requests = 0;      // attempts sent, retries included
  std::uint64_t retries = 0;       // attempts after a transient failure
  std::uint64_t bytes = 0;         // body bytes received
  std::vector<HostStats> hosts{};  // per host, sorted by host
};

class ObjectStore {
 public:
  /// Resolves credentials, region and endpoint (see the file comment). Throws
  /// StorageError(bad_request) when a named profile does not exist or only one of the
  /// key id and the secret is set.
  explicit ObjectStore(StoreOptions options = {});
  ~ObjectStore();
  ObjectStore(const ObjectStore&) = delete;
  ObjectStore& operator=(const ObjectStore&) = delete;

  /// The whole object.
  std::vector<std::byte> get(std::string_view url);
  /// Exactly `size` bytes from `offset` (a Range request, its Content-Range and length
  /// checked): out_of_range when the object ends before offset + size, short_body when
  /// the server sends fewer bytes than it announced. size 0 returns nothing, no request.
  std::vector<std::byte> get(std::string_view url, std::uint64_t offset, std::uint64_t size);
  /// Streams exactly `size` bytes from `offset` to `sink` as they arrive, in order, in
  /// pieces of any size: one Range request, checked as get(url, offset, size) checks its
  /// answer (Content-Range, its total against `object_size` when that is not 0, and the
  /// ETag against `etag` when that is not empty: another is `changed`). A transient
  /// failure, also mid-body, is retried (StoreOptions::retries) from the first byte not
  /// yet delivered, so `sink` sees every byte once, in order. An exception from `sink`
  /// aborts the transfer and propagates (no retry). size 0: no request. `stop` requested
  /// (before or during the request, also while it waits for the host's slot or a retry's
  /// backoff) aborts it with `cancelled`, not retried: libcurl looks at it whenever bytes
  /// arrive and about once a second while none do.
  void get_stream(std::string_view url, std::uint64_t offset, std::uint64_t size,
                  const std::function<void(const std::byte* data, std::size_t size)>& sink,
                  std::uint64_t object_size = 0, std::string_view etag = {},
                  std::stop_token stop = {});
  /// Size and ETag (HEAD).
  ObjectInfo head(std::string_view url);
  /// Every object under an s3:// prefix (ListObjectsV2, all pages), sorted by key as
  /// bytes; "s3://b/train/" lists train/'s objects at every depth. https:// cannot be
  /// listed (unsupported).
  std::vector<ObjectEntry> list(std::string_view prefix_url);

  StoreStats stats() const;
  const std::string& region() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace brigade::transport

template <>
struct std::is_error_code_enum<brigade::transport::StorageErrc> : std::true_type {};
