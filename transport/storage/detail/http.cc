#include "transport/storage/detail/http.h"

#include <curl/curl.h>

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <unordered_map>

namespace brigade::transport::detail {
namespace {

struct EasyDeleter {
  void operator()(CURL* handle) const { curl_easy_cleanup(handle); }
};
struct ShareDeleter {
  void operator()(CURLSH* share) const { curl_share_cleanup(share); }
};
struct ListDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};
using Easy = std::unique_ptr<CURL, EasyDeleter>;

void global_init() {
  static const bool done = [] { return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }();
  if (!done) throw StorageError(StorageErrc::unreachable, {}, "cannot initialize libcurl");
}

// The one place a curl code becomes ours.
StorageErrc code_of(CURLcode code) {
  switch (code) {
    case CURLE_OPERATION_TIMEDOUT:
      return StorageErrc::timed_out;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
      return StorageErrc::unreachable;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
      return StorageErrc::tls_failed;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
      return StorageErrc::invalid_url;
    default:  // reset, closed mid-body (PARTIAL_FILE), GOT_NOTHING, SEND/RECV_ERROR, TLS I/O
      return StorageErrc::connection_lost;
  }
}

// A host's handles and its in-flight count. DNS and TLS sessions are shared between the
// handles through `share`, whose locks are these mutexes.
struct HostPool {
  std::mutex mutex;
  std::condition_variable_any freed;
  int in_flight = 0;
  std::vector<Easy> idle;
  std::unique_ptr<CURLSH, ShareDeleter> share;
  std::mutex share_locks[CURL_LOCK_DATA_LAST];
};

void lock_share(CURL*, curl_lock_data data, curl_lock_access, void* pool) {
  static_cast<HostPool*>(pool)->share_locks[data].lock();
}
void unlock_share(CURL*, curl_lock_data data, void* pool) {
  static_cast<HostPool*>(pool)->share_locks[data].unlock();
}

// What the body callback writes to: the response, and for a streamed request its sinks.
struct BodyTarget {
  HttpResponse* response = nullptr;
  const HttpRequest* request = nullptr;
  CURL* handle = nullptr;
  int streaming = -1;          // -1: not decided yet (the first piece decides), 0: no, 1: yes
  std::exception_ptr error{};  // thrown by a sink: the transfer was aborted for it
};

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto& target = *static_cast<BodyTarget*>(user);
  auto bytes = reinterpret_cast<const std::byte*>(data);
  const std::size_t n = size * count;
  try {
    if (target.streaming < 0) {
      long status = 0;
      curl_easy_getinfo(target.handle, CURLINFO_RESPONSE_CODE, &status);
      target.streaming = target.request->on_body && status >= 200 && status < 300 ? 1 : 0;
      if (target.streaming && target.request->on_head) {
        target.request->on_head(static_cast<int>(status), target.response->headers);
      }
    }
    if (target.streaming) {
      target.request->on_body(bytes, n);
    } else {
      target.response->body.insert(target.response->body.end(), bytes, bytes + n);
    }
  } catch (...) {
    target.error = std::current_exception();
    return 0;  // CURLE_WRITE_ERROR: aborted
  }
  return n;
}

int on_progress(void* request, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<const HttpRequest*>(request)->stop.stop_requested() ? 1 : 0;  // 1: abort
}

StorageError cancelled(const HttpRequest& request) {
  return StorageError(StorageErrc::cancelled, request.display_url,
                      request.method + " " + request.display_url + ": cancelled (a stop)");
}

size_t on_header(char* data, size_t size, size_t count, void* response) {
  std::string_view line(data, size * count);
  auto colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string name(line.substr(0, colon));
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() &&
           (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) {
      value.remove_suffix(1);
    }
    static_cast<HttpResponse*>(response)->headers[name] = std::string(value);
  } else if (line.rfind("HTTP/", 0) == 0) {
    static_cast<HttpResponse*>(response)->headers.clear();  // a new response (after a 100)
  }
  return size * count;
}

}  // namespace

struct HttpClient::Impl {
  StoreOptions options;
  std::mutex mutex;  // guards hosts
  std::unordered_map<std::string, std::unique_ptr<HostPool>> hosts;

  HostPool& pool(const std::string& host) {
    std::lock_guard lock(mutex);
    auto& pool = hosts[host];
    if (!pool) {
      pool = std::make_unique<HostPool>();
      pool->share.reset(curl_share_init());
      curl_share_setopt(pool->share.get(), CURLSHOPT_LOCKFUNC, lock_share);
      curl_share_setopt(pool->share.get(), CURLSHOPT_UNLOCKFUNC, unlock_share);
      curl_share_setopt(pool->share.get(), CURLSHOPT_USERDATA, pool.get());
      curl_share_setopt(pool->share.get(), CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
      curl_share_setopt(pool->share.get(), CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    }
    return *pool;
  }

  Easy acquire(HostPool& pool, const HttpRequest& request) {
    std::unique_lock lock(pool.mutex);
    if (!pool.freed.wait(lock, request.stop,
                         [&] { return pool.in_flight < options.max_requests_per_host; })) {
      throw cancelled(request);
    }
    ++pool.in_flight;
    if (!pool.idle.empty()) {
      Easy handle = std::move(pool.idle.back());
      pool.idle.pop_back();
      return handle;
    }
    lock.unlock();
    Easy handle(curl_easy_init());
    if (!handle) {
      release(pool, nullptr);
      throw StorageError(StorageErrc::unreachable, {}, "cannot make a libcurl handle");
    }
    return handle;
  }

  void release(HostPool& pool, Easy handle) {
    std::lock_guard lock(pool.mutex);
    --pool.in_flight;
    if (handle) pool.idle.push_back(std::move(handle));
    pool.freed.notify_one();
  }

  void configure(CURL* handle, HostPool& pool, const HttpRequest& request, curl_slist* headers,
                 HttpResponse& response, BodyTarget& target) {
    curl_easy_reset(handle);  // keeps the connection cache
    curl_easy_setopt(handle, CURLOPT_URL, request.url.c_str());
    curl_easy_setopt(handle, CURLOPT_SHARE, pool.share.get());
    curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS, static_cast<long>(options.timeout.count()));
    curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(options.connect_timeout.count()));
    curl_easy_setopt(handle, CURLOPT_SSL_VERIFYPEER, options.verify_tls ? 1L : 0L);
    curl_easy_setopt(handle, CURLOPT_SSL_VERIFYHOST, options.verify_tls ? 2L : 0L);
    if (!options.ca_file.empty()) curl_easy_setopt(handle, CURLOPT_CAINFO, options.ca_file.c_str());
    curl_easy_setopt(handle, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers);
    if (request.follow_redirects) {
      curl_easy_setopt(handle, CURLOPT_FOLLOWLOCATION, 1L);
      curl_easy_setopt(handle, CURLOPT_MAXREDIRS, 5L);
      curl_easy_setopt(handle, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    }
    if (request.method == "HEAD") {
      curl_easy_setopt(handle, CURLOPT_NOBODY, 1L);
    } else if (request.method != "GET") {
      curl_easy_setopt(handle, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    }
    curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(handle, CURLOPT_WRITEDATA, &target);
    curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(handle, CURLOPT_HEADERDATA, &response);
    if (request.stop.stop_possible()) {
      curl_easy_setopt(handle, CURLOPT_NOPROGRESS, 0L);
      curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, on_progress);
      curl_easy_setopt(handle, CURLOPT_XFERINFODATA, &request);
    }
  }
};

HttpClient::HttpClient(const StoreOptions& options) : impl_(std::make_unique<Impl>()) {
  global_init();
  impl_->options = options;
  impl_->options.max_requests_per_host = std::max(1, options.max_requests_per_host);
}

HttpClient::~HttpClient() = default;

HttpResponse HttpClient::perform(const std::string& host, const HttpRequest& request) {
  HostPool& pool = impl_->pool(host);
  if (request.stop.stop_requested()) throw cancelled(request);
  Easy handle = impl_->acquire(pool, request);
  std::unique_ptr<curl_slist, ListDeleter> headers;
  for (const auto& header : request.headers) {
    headers.reset(curl_slist_append(headers.release(), header.c_str()));
  }
  HttpResponse response;
  if (!request.on_body) response.body.reserve(request.expected_size);
  BodyTarget target{.response = &response, .request = &request, .handle = handle.get()};
  impl_->configure(handle.get(), pool, request, headers.get(), response, target);
  char detail[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(handle.get(), CURLOPT_ERRORBUFFER, detail);
  CURLcode code = curl_easy_perform(handle.get());
  long status = 0;
  curl_easy_getinfo(handle.get(), CURLINFO_RESPONSE_CODE, &status);
  curl_easy_setopt(handle.get(), CURLOPT_ERRORBUFFER, nullptr);
  // A failed handle may hold a broken connection: drop it rather than pool it.
  impl_->release(pool, code == CURLE_OK ? std::move(handle) : Easy());
  if (target.error) std::rethrow_exception(target.error);
  if (code == CURLE_ABORTED_BY_CALLBACK) throw cancelled(request);
  if (code != CURLE_OK) {
    std::string text = detail[0] ? detail : curl_easy_strerror(code);
    throw StorageError(code_of(code), request.display_url,
                       request.method + " " + request.display_url + ": " + text);
  }
  response.status = static_cast<int>(status);
  return response;
}

}  // namespace brigade::transport::detail
