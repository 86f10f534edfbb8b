#pragma once
// AWS Signature Version 4 (header-based), for S3: the canonical request, the string to
// sign and the Authorization header value. Pure functions of their inputs (the date is
// given), tested against AWS's published test suite and S3 examples
// (tests/transport/storage/sigv4_vectors/).
//
// S3's rules, which differ from the generic suite's: the path is the key, URI-encoded
// ONCE per segment (slashes kept, never double-encoded, no `.`/`..` normalization); the
// payload hash is the body's SHA-256 in hex or "UNSIGNED-PAYLOAD", and the caller sends
// it as x-amz-content-sha256 (which is then signed like any header).

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace brigade::transport::detail {

struct SignableRequest {
  std::string method;  // "GET"
  std::string path;    // decoded, starting with '/': "/bucket/a b/c.jpg"
  std::vector<std::pair<std::string, std::string>> query;    // decoded names and values
  std::vector<std::pair<std::string, std::string>> headers;  // as sent; host, x-amz-date in it
  std::string payload_hash;  // hex SHA-256 of the body, or "UNSIGNED-PAYLOAD"
};

struct SigningScope {
  std::string_view access_key_id;
  std::string_view secret_access_key;
  std::string_view region;    // "us-east-1"
  std::string_view service;   // "s3"
  std::string_view amz_date;  // "20150830T123600Z", the x-amz-date header's value
};

struct Signature {
  std::string canonical_request;
  std::string string_to_sign;
  std::string authorization;  // "AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…"
};

Signature sign_v4(const SignableRequest& request, const SigningScope& scope);

/// RFC 3986 unreserved characters kept (A-Z a-z 0-9 - . _ ~), every other byte %XX
/// (upper-case hex); '/' kept when `keep_slash`.
std::string uri_encode(std::string_view text, bool keep_slash);
/// The canonical query string: names and values encoded, sorted by name then value.
std::string canonical_query(const std::vector<std::pair<std::string, std::string>>& query);
std::string sha256_hex(std::string_view bytes);
/// "20150830T123600Z" for a time in seconds since the epoch (UTC).
std::string amz_date(long long unix_seconds);

}  // namespace brigade::transport::detail
