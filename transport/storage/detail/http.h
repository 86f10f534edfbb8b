#pragma once
// One HTTP exchange through libcurl, and the per-host pools of easy handles that make
// them: a handle is reused for the same host (its connection kept alive, TLS resumed),
// at most StoreOptions::max_requests_per_host exchanges per host run at once (callers
// beyond wait), and DNS and TLS sessions are shared between a host's handles. Safe to
// call from many threads. No retry here: ObjectStore decides.

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

#include "transport/storage/object_store.h"

namespace brigade::transport::detail {

struct HttpRequest {
  std::string method;                // "GET", "HEAD"
  std::string url;                   // absolute, already encoded
  std::vector<std::string> headers;  // "Name: value"
  std::string display_url;           // for messages: the object's URL (never a presigned query)
  std::size_t expected_size = 0;     // a hint to reserve the body
  bool follow_redirects = false;     // unsigned http(s) URLs only (a CDN's 302); at most 5
  /// Set: a 2xx answer's body goes to `on_head` (once, before its first byte: the status and
  /// headers) and then to `on_body` piece by piece as it arrives, instead of into
  /// HttpResponse::body (which then holds only a non-2xx answer's body). Either may throw:
  /// the transfer is aborted and perform() rethrows that exception.
  std::function<void(int status, const std::map<std::string, std::string>& headers)> on_head{};
  std::function<void(const std::byte* data, std::size_t size)> on_body{};
  /// Requested: perform() gives up (waiting for the host's slot, or mid-transfer: libcurl
  /// asks whenever bytes arrive and about once a second while none do) and throws
  /// StorageError(cancelled).
  std::stop_token stop{};
};

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-case, the last of repeats
  std::vector<std::byte> body;
};

class HttpClient {
 public:
  explicit HttpClient(const StoreOptions& options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  /// Sends `request` to `host` (the pool's key: scheme://authority). A transport failure
  /// (timeout, reset, refused, TLS) throws StorageError with the mapped code; any HTTP
  /// status is returned, with its body.
  HttpResponse perform(const std::string& host, const HttpRequest& request);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace brigade::transport::detail
