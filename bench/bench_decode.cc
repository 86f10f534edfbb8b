// bench_decode: decode throughput of brigade::media against references.
//
//   bench_decode [--kind image|video] [--op eval224|train224] [--list FILE] [--threads N]
//                [--seconds S]
//                [--video-profile fast|x264-default] [--width W] [--height H]
//                [--clip-seconds S] [--fps F] [--clips N] [--write DIR]
//                [--only-brigade]
//
// Image: decode + ImageNet eval transform (shorter side 256, center crop 224,
// RGB). Rows: "brigade" (load_image), "turbojpeg" (TurboJPEG full RGB decode
// with accurate DCT + swscale bilinear crop-resize, the usual recipe; the
// reference of ratio_vs_reference) and "ffmpeg-mjpeg" (FFmpeg's MJPEG decoder +
// the same swscale step: why load_image uses libjpeg-turbo for JPEG), and
// "brigade-transform" (media/transform.h's eval, what `brigade run` does: PIL's
// geometry and filter, region-of-interest decode).
// --op train224: RandomResizedCrop(224) + flip (media/transform.h, seed 0, epoch 0,
// sample id = file index) on JPEGs of varied sizes (ImageNet-like and up to 2048x1536)
// and qualities (75, 90, 95). Rows: "brigade-roi" (region-of-interest decode at the
// chosen DCT scale) and "full-decode" (the same transform decoding the whole image at
// scale 1, then cropping and resizing with the same filter: the reference). The
// brigade-roi row adds the share of each DCT scale chosen, the share of the scaled
// pixels not reconstructed, and the share of compressed bytes never entropy-decoded
// (after the crop's last row), over one pass.
// Video: 8 evenly spaced frames per clip at 224x224 RGB. Rows: "brigade"
// (load_video), "libav-sequential" (libavcodec decoding every frame, as a
// player would, converting the 8 selected) and "ffmpeg-cli" (the ffmpeg
// program with -threads 1, when installed; includes its process start-up).
//
// Inputs are read into memory first (the CLI reads its files from disk);
// without --list, synthetic media is generated (ImageNet-like q90 4:2:0 JPEGs;
// H.264 clips: by default ("fast") 10 s 320x240 at 25 fps, keyframes every 50
// frames, 2 B-frames; "x264-default" clips are encoded like users' videos, with
// x264's defaults (keyint 250, 3 B-frames with B-pyramid...), by default 2 s
// 640x360 at 30 fps: one keyframe, then P and B frames). The --width,
// --height, --clip-seconds, --fps and --clips flags change the generated
// clips. Exactly N worker threads decode, each single-threaded. One untimed
// warm-up pass per implementation, then whole passes, implementations taking
// turns, until each has run --seconds. JSON lines on stdout, a table on
// stderr. ratio_vs_reference (brigade rows) is brigade's rate over the first
// reference row's (libav-sequential for video). Video rows name the clips
// (profile, size, fps, frames per clip); the brigade row adds load_video's
// DecodeStats summed over one pass (packets, packets_skippable,
// frames_decoded, seeks).
//
// --write DIR writes the synthetic inputs (the clips of the profile, or the 48
// JPEGs) into DIR as files (clipN.mp4, imageN.jpg) and exits without measuring:
// bench/e2e.py uses it to run every loader on such files. --only-brigade runs
// the image brigade row alone (train224: the brigade-roi row; no references: e.g. to
// profile it). --seconds 0 runs the untimed warm-up pass alone: one pass over the
// inputs, e.g. to count instructions per image under callgrind.
#include <sys/resource.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libswscale/swscale.h>
}

#include "media/detail/libjpeg.h"
#include "media/errors.h"
#include "media/image.h"
#include "media/synthetic.h"
#include "media/transform.h"
#include "media/video.h"

namespace {

using brigade::media::Bytes;
namespace bm = brigade::media;

struct Args {
  std::string kind = "image";
  std::string op = "eval224";
  std::string list;
  int threads = 1;
  double seconds = 3.0;
  // Synthetic clips (0: the profile's default).
  std::string video_profile = "fast";
  int width = 0;
  int height = 0;
  double clip_seconds = 0;
  int fps = 0;
  int clips = 6;
  std::string write_dir;      // --write: only write the synthetic inputs there
  bool only_brigade = false;  // --only-brigade: no reference rows (e.g. to profile it alone)
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "missing value for %s\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--kind")
      a.kind = value();
    else if (k == "--op")
      a.op = value();
    else if (k == "--list")
      a.list = value();
    else if (k == "--threads")
      a.threads = std::atoi(value().c_str());
    else if (k == "--seconds")
      a.seconds = std::atof(value().c_str());
    else if (k == "--video-profile")
      a.video_profile = value();
    else if (k == "--width")
      a.width = std::atoi(value().c_str());
    else if (k == "--height")
      a.height = std::atoi(value().c_str());
    else if (k == "--clip-seconds")
      a.clip_seconds = std::atof(value().c_str());
    else if (k == "--fps")
      a.fps = std::atoi(value().c_str());
    else if (k == "--clips")
      a.clips = std::atoi(value().c_str());
    else if (k == "--write")
      a.write_dir = value();
    else if (k == "--only-brigade")
      a.only_brigade = true;
    else {
      std::fprintf(stderr,
                   "usage: bench_decode [--kind image|video] [--op eval224|train224] "
                   "[--list FILE] [--threads N] [--seconds S]\n"
                   "                    [--video-profile fast|x264-default] [--width W] "
                   "[--height H]\n"
                   "                    [--clip-seconds S] [--fps F] [--clips N] [--write DIR]\n");
      std::exit(2);
    }
  }
  if (!a.write_dir.empty() && !a.list.empty()) {
    std::fprintf(stderr, "--write writes the synthetic inputs: not with --list\n");
    std::exit(2);
  }
  if (a.only_brigade && a.kind != "image") {
    std::fprintf(stderr, "--only-brigade: images only\n");
    std::exit(2);
  }
  if ((a.kind != "image" && a.kind != "video") || a.threads <= 0 ||
      (a.op != "eval224" && a.op != "train224")) {
    std::fprintf(stderr, "bad --kind, --op or --threads\n");
    std::exit(2);
  }
  if ((a.video_profile != "fast" && a.video_profile != "x264-default") || a.width < 0 ||
      a.height < 0 || a.clip_seconds < 0 || a.fps < 0 || a.clips <= 0) {
    std::fprintf(stderr,
                 "bad --video-profile, --width, --height, --clip-seconds, --fps or --clips\n");
    std::exit(2);
  }
  return a;
}

double cpu_seconds(int who) {
  rusage u{};
  getrusage(who, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

struct Result {
  long items = 0;
  double seconds = 0;
  double cpu = 0;
  long failures = 0;
};

struct Impl {
  std::function<void(std::size_t)> fn;
  std::size_t items;       // items per pass
  bool child_cpu = false;  // the work runs in child processes
};

// Runs every impl's fn(i) for all its items on exactly `threads` threads: one
// warm-up pass each, then passes taking turns (so that load from elsewhere on
// the machine hits all impls alike) until each has run `min_seconds`.
std::vector<Result> run(const std::vector<Impl>& impls, int threads, double min_seconds) {
  std::atomic<long> failures{0};
  auto pass = [&](const Impl& impl) {
    std::atomic<std::size_t> next{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        for (std::size_t i; (i = next.fetch_add(1)) < impl.items;) {
          try {
            impl.fn(i);
          } catch (const std::exception& e) {
            if (failures.fetch_add(1) < 3) std::fprintf(stderr, "failure: %s\n", e.what());
          }
        }
      });
    }
    for (auto& t : pool) t.join();
  };
  for (const Impl& impl : impls) pass(impl);  // warm-up
  std::vector<Result> results(impls.size());
  bool more = true;
  while (more) {
    more = false;
    for (std::size_t k = 0; k < impls.size(); ++k) {
      Result& r = results[k];
      if (r.seconds >= min_seconds) continue;
      more = true;
      failures = 0;
      const double cpu0 =
          cpu_seconds(RUSAGE_SELF) + (impls[k].child_cpu ? cpu_seconds(RUSAGE_CHILDREN) : 0);
      const auto t0 = std::chrono::steady_clock::now();
      pass(impls[k]);
      r.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      r.cpu +=
          cpu_seconds(RUSAGE_SELF) + (impls[k].child_cpu ? cpu_seconds(RUSAGE_CHILDREN) : 0) - cpu0;
      r.items += long(impls[k].items);
      r.failures += failures;
    }
  }
  return results;
}

// `extra`: more JSON members, each starting with a comma (or empty).
void report(const char* impl, const std::string& kind, const char* op, int threads, const Result& r,
            const char* unit, double ratio, const std::string& extra = "") {
  const double rate = double(r.items) / r.seconds, cpu_ms = 1e3 * r.cpu / double(r.items);
  std::printf(
      "{\"bench\":\"decode\",\"impl\":\"%s\",\"kind\":\"%s\",\"op\":\"%s\",\"threads\":%d%s,"
      "\"%s\":%ld,\"%s_per_s\":%.1f,\"cpu_ms_per_%s\":%.3f,\"failures\":%ld",
      impl, kind.c_str(), op, threads, extra.c_str(), unit, r.items, unit, rate,
      unit[0] == 'i' ? "image" : "clip", cpu_ms, r.failures);
  if (ratio > 0) std::printf(",\"ratio_vs_reference\":%.3f", ratio);
  std::printf("}\n");
  std::fflush(stdout);
  std::fprintf(stderr, "%-18s %-6s threads=%d %10.1f %s/s  %8.3f cpu-ms each  failures=%ld\n", impl,
               kind.c_str(), threads, rate, unit, cpu_ms, r.failures);
}

std::vector<std::string> read_list(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(2);
  }
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

// ---- image references ------------------------------------------------------

struct TjDeleter {
  void operator()(void* h) const { tjDestroy(h); }
};
struct SwsDeleter {
  void operator()(SwsContext* c) const { sws_freeContext(c); }
};

// TurboJPEG full-size RGB decode (accurate DCT), then swscale bilinear of the
// center-crop region (torchvision's Resize(256) + CenterCrop(224) rounding).
void turbojpeg_eval224(const Bytes& jpeg, std::uint8_t* out) {
  thread_local std::unique_ptr<void, TjDeleter> tj(tjInitDecompress());
  thread_local std::vector<std::uint8_t> rgb;
  thread_local std::unique_ptr<SwsContext, SwsDeleter> sws;
  int w = 0, h = 0, ss = 0, cs = 0;
  if (tjDecompressHeader3(tj.get(), jpeg.data(), jpeg.size(), &w, &h, &ss, &cs) != 0)
    throw std::runtime_error("header");
  if (rgb.size() < std::size_t(w) * h * 3 + 64) rgb.resize(std::size_t(w) * h * 3 + 64);
  if (tjDecompress2(tj.get(), jpeg.data(), jpeg.size(), rgb.data(), w, w * 3, h, TJPF_RGB,
                    TJFLAG_ACCURATEDCT) != 0) {
    throw std::runtime_error(tjGetErrorStr2(tj.get()));
  }
  const int rw = w <= h ? 256 : int(256LL * w / h), rh = w <= h ? int(256LL * h / w) : 256;
  const int left = int(std::lround((rw - 224) / 2.0)), top = int(std::lround((rh - 224) / 2.0));
  const double sx = double(w) / rw, sy = double(h) / rh;
  const int x0 = int(std::lround(left * sx)), x1 = int(std::lround((left + 224) * sx));
  const int y0 = int(std::lround(top * sy)), y1 = int(std::lround((top + 224) * sy));
  sws.reset(sws_getCachedContext(sws.release(), x1 - x0, y1 - y0, AV_PIX_FMT_RGB24, 224, 224,
                                 AV_PIX_FMT_RGB24, SWS_BILINEAR | SWS_ACCURATE_RND, nullptr,
                                 nullptr, nullptr));
  const std::uint8_t* src[1] = {rgb.data() + (std::size_t(y0) * w + x0) * 3};
  const int src_stride[1] = {w * 3};
  std::uint8_t* dst[1] = {out};
  const int dst_stride[1] = {224 * 3};
  sws_scale(sws.get(), src, src_stride, 0, y1 - y0, dst, dst_stride);
}

struct CodecFreerImg {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};

// FFmpeg's MJPEG decoder (threads=1) + the same swscale crop-resize: the
// measurement behind using libjpeg-turbo for JPEG in load_image.
void ffmpeg_mjpeg_eval224(const Bytes& jpeg, std::uint8_t* out) {
  thread_local std::unique_ptr<AVCodecContext, CodecFreerImg> ctx;
  thread_local std::unique_ptr<SwsContext, SwsDeleter> sws;
  thread_local AVPacket* pkt = av_packet_alloc();
  thread_local AVFrame* frame = av_frame_alloc();
  if (!ctx) {
    const AVCodec* codec = avcodec_find_decoder(AV_CODEC_ID_MJPEG);
    ctx.reset(avcodec_alloc_context3(codec));
    ctx->thread_count = 1;
    if (avcodec_open2(ctx.get(), codec, nullptr) < 0) throw std::runtime_error("mjpeg");
  }
  pkt->data = const_cast<std::uint8_t*>(jpeg.data());
  pkt->size = int(jpeg.size());
  if (avcodec_send_packet(ctx.get(), pkt) < 0 || avcodec_receive_frame(ctx.get(), frame) < 0) {
    throw std::runtime_error("mjpeg decode");
  }
  const int w = frame->width, h = frame->height;
  const int rw = w <= h ? 256 : int(256LL * w / h), rh = w <= h ? int(256LL * h / w) : 256;
  const int left = int(std::lround((rw - 224) / 2.0)), top = int(std::lround((rh - 224) / 2.0));
  const double sx = double(w) / rw, sy = double(h) / rh;
  const int x0 = int(std::lround(left * sx)) & ~1, x1 = int(std::lround((left + 224) * sx));
  const int y0 = int(std::lround(top * sy)) & ~1, y1 = int(std::lround((top + 224) * sy));
  // yuvj420p is yuv420p with full range (set explicitly: swscale warns and
  // re-initialises on the deprecated format).
  sws.reset(sws_getCachedContext(
      sws.release(), x1 - x0, y1 - y0, AV_PIX_FMT_YUV420P, 224, 224, AV_PIX_FMT_RGB24,
      SWS_BILINEAR | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT, nullptr, nullptr, nullptr));
  sws_setColorspaceDetails(sws.get(), sws_getCoefficients(SWS_CS_ITU601), 1,
                           sws_getCoefficients(SWS_CS_ITU601), 1, 0, 1 << 16, 1 << 16);
  const std::uint8_t* src[3] = {frame->data[0] + std::size_t(y0) * frame->linesize[0] + x0,
                                frame->data[1] + std::size_t(y0 / 2) * frame->linesize[1] + x0 / 2,
                                frame->data[2] + std::size_t(y0 / 2) * frame->linesize[2] + x0 / 2};
  std::uint8_t* dst[1] = {out};
  const int dst_stride[1] = {224 * 3};
  sws_scale(sws.get(), src, frame->linesize, 0, y1 - y0, dst, dst_stride);
  av_frame_unref(frame);
}

// The train224 row's extra members: DCT scale shares and what the region decode skipped.
std::string fmt_extra(const double share[9], double pixels, double decoded, double bytes,
                      double unread, double full_pixels) {
  char buf[400];
  std::snprintf(buf, sizeof buf,
                ",\"dct_scale_share\":{\"1\":%.3f,\"1/2\":%.3f,\"1/4\":%.3f,\"1/8\":%.3f},"
                "\"scaled_pixels_skipped_share\":%.3f,\"pixels_vs_full_decode\":%.3f,"
                "\"bytes_not_entropy_decoded_share\":%.3f",
                share[1], share[2], share[4], share[8], pixels > 0 ? 1 - decoded / pixels : 0,
                full_pixels > 0 ? decoded / full_pixels : 0, bytes > 0 ? unread / bytes : 0);
  std::fprintf(stderr,
               "DCT scale share: 1/1 %.3f, 1/2 %.3f, 1/4 %.3f, 1/8 %.3f; scaled pixels skipped "
               "%.3f; pixels reconstructed vs a full decode %.3f; compressed bytes never "
               "entropy-decoded %.3f\n",
               share[1], share[2], share[4], share[8], pixels > 0 ? 1 - decoded / pixels : 0,
               full_pixels > 0 ? decoded / full_pixels : 0, bytes > 0 ? unread / bytes : 0);
  return buf;
}

int bench_images(const Args& a) {
  std::vector<Bytes> files;
  if (a.list.empty()) {
    // ImageNet-like sizes (most are 500 px on the long side), q90 4:2:0.
    const int sizes[][2] = {{500, 375}, {375, 500}, {500, 333}, {333, 500},
                            {500, 400}, {640, 480}, {500, 500}, {400, 300}};
    for (int i = 0; i < 48; ++i)
      files.push_back(bm::make_image(bm::ImageCodec::jpeg, sizes[i % 8][0], sizes[i % 8][1], i));
    if (!a.write_dir.empty()) {
      std::filesystem::create_directories(a.write_dir);
      for (std::size_t i = 0; i < files.size(); ++i)
        bm::write_file(a.write_dir + "/image" + std::to_string(i) + ".jpg", files[i]);
      return 0;
    }
  } else {
    for (const auto& p : read_list(a.list)) files.push_back(bm::read_file(p));
  }
  std::vector<std::size_t> jpegs;
  double bytes = 0;
  for (std::size_t i = 0; i < files.size(); ++i) {
    bytes += double(files[i].size());
    if (files[i].size() > 2 && files[i][0] == 0xFF && files[i][1] == 0xD8) jpegs.push_back(i);
  }
  std::fprintf(stderr, "images: %zu (%zu JPEG), mean %.1f KB\n", files.size(), jpegs.size(),
               bytes / files.size() / 1e3);
  const bm::ImageOptions eval = bm::imagenet_eval_options();
  const std::vector<std::int64_t> shape{224, 224, 3};
  auto out_for_thread = [] {
    thread_local bm::Tensor out = bm::Tensor::empty(bm::DType::uint8, {224, 224, 3});
    return out;
  };
  std::vector<Impl> impls = {{[&](std::size_t i) {
                                bm::load_image_into(
                                    bm::Source::memory(files[i], "image " + std::to_string(i)),
                                    eval, out_for_thread());
                              },
                              files.size()}};
  if (!jpegs.empty() && !a.only_brigade) {
    impls.push_back({[&](std::size_t i) {
                       turbojpeg_eval224(files[jpegs[i]], out_for_thread().data_as<std::uint8_t>());
                     },
                     jpegs.size()});
    impls.push_back({[&](std::size_t i) {
                       ffmpeg_mjpeg_eval224(files[jpegs[i]],
                                            out_for_thread().data_as<std::uint8_t>());
                     },
                     jpegs.size()});
  }
  const bm::TransformOptions transform;  // eval: Resize(256) + CenterCrop(224)
  impls.push_back({[&](std::size_t i) {
                     bm::load_transformed_into(
                         bm::Source::memory(files[i], "image " + std::to_string(i)), transform, i,
                         out_for_thread());
                   },
                   files.size()});
  const std::vector<Result> results = run(impls, a.threads, a.seconds);
  const Result ours = results[0];
  const bool refs = !jpegs.empty() && !a.only_brigade;
  const Result ref = refs ? results[1] : Result{};
  const Result mjpeg = refs ? results[2] : Result{};
  const Result tr = results.back();
  auto vs_ref = [&](const Result& r) {
    if (jpegs.size() != files.size() || ref.items == 0) return 0.0;
    return (double(r.items) / r.seconds) / (double(ref.items) / ref.seconds);
  };
  report("brigade", "image", "eval224", a.threads, ours, "images", vs_ref(ours));
  if (ref.items > 0) report("turbojpeg", "image", "eval224", a.threads, ref, "images", 0);
  if (mjpeg.items > 0) report("ffmpeg-mjpeg", "image", "eval224", a.threads, mjpeg, "images", 0);
  report("brigade-transform", "image", "eval224", a.threads, tr, "images", vs_ref(tr));
  return 0;
}

// RandomResizedCrop(224) + flip: region-of-interest decode vs a full decode.
int bench_train(const Args& a) {
  std::vector<Bytes> files;
  if (a.list.empty()) {
    const int sizes[][2] = {{500, 375},  {375, 500},  {500, 333},   {333, 500},
                            {500, 400},  {640, 480},  {500, 500},   {400, 300},
                            {1024, 768}, {768, 1024}, {1600, 1200}, {2048, 1536}};
    const int qualities[] = {75, 90, 95};
    for (int i = 0; i < 48; ++i)
      files.push_back(bm::make_image(bm::ImageCodec::jpeg, sizes[i % 12][0], sizes[i % 12][1], i,
                                     qualities[i % 3]));
  } else {
    for (const auto& p : read_list(a.list)) files.push_back(bm::read_file(p));
  }
  double bytes = 0;
  for (const auto& f : files) bytes += double(f.size());
  std::fprintf(stderr, "images: %zu, mean %.1f KB\n", files.size(), bytes / files.size() / 1e3);
  bm::TransformOptions roi;
  roi.kind = bm::TransformKind::train;
  bm::TransformOptions full = roi;
  full.roi_decode = false;
  auto out_for_thread = [] {
    thread_local bm::Tensor out = bm::Tensor::empty(bm::DType::uint8, {224, 224, 3});
    return out;
  };
  std::vector<bm::detail::JpegDecodeFigures> figures(files.size());
  std::vector<Impl> impls = {{[&](std::size_t i) {
                                bm::detail::thread_jpeg_figures() = {};
                                bm::load_transformed_into(
                                    bm::Source::memory(files[i], "image " + std::to_string(i)), roi,
                                    i, out_for_thread());
                                figures[i] = bm::detail::thread_jpeg_figures();
                              },
                              files.size()}};
  if (!a.only_brigade) {
    impls.push_back({[&](std::size_t i) {
                       bm::load_transformed_into(
                           bm::Source::memory(files[i], "image " + std::to_string(i)), full, i,
                           out_for_thread());
                     },
                     files.size()});
  }
  const std::vector<Result> results = run(impls, a.threads, a.seconds);
  double share[9] = {}, pixels = 0, decoded = 0, total_bytes = 0, unread = 0, full_pixels = 0;
  for (const auto& f : figures) {
    full_pixels += double(f.pixels) * f.scale_denom * f.scale_denom;
    share[f.scale_denom > 0 && f.scale_denom <= 8 ? f.scale_denom : 0] += 1.0 / figures.size();
    pixels += double(f.pixels);
    decoded += double(f.pixels_decoded);
    total_bytes += double(f.bytes);
    unread += double(f.bytes_unread);
  }
  const std::string extra = fmt_extra(share, pixels, decoded, total_bytes, unread, full_pixels);
  if (a.only_brigade) {
    report("brigade-roi", "image", "train224", a.threads, results[0], "images", 0, extra);
    return 0;
  }
  const double ratio = (double(results[0].items) / results[0].seconds) /
                       (double(results[1].items) / results[1].seconds);
  report("brigade-roi", "image", "train224", a.threads, results[0], "images", ratio, extra);
  report("full-decode", "image", "train224", a.threads, results[1], "images", 0);
  return 0;
}

// ---- video references ------------------------------------------------------

std::vector<std::int64_t> eight_indices(std::int64_t frames) {
  std::vector<std::int64_t> idx;
  for (int i = 0; i < 8; ++i) idx.push_back(std::lround(i * double(frames - 1) / 7));
  return idx;
}

struct FormatCloser {
  void operator()(AVFormatContext* f) const { avformat_close_input(&f); }
};
struct CodecFreer {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct FrameFreer {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct PacketFreer {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};

// libavcodec decoding every frame of `path` (threads=1), converting the selected ones.
void libav_sequential(const std::string& path, const std::vector<std::int64_t>& wanted,
                      std::uint8_t* out) {
  AVFormatContext* raw = nullptr;
  if (avformat_open_input(&raw, path.c_str(), nullptr, nullptr) < 0)
    throw std::runtime_error("open " + path);
  std::unique_ptr<AVFormatContext, FormatCloser> fmt(raw);
  avformat_find_stream_info(fmt.get(), nullptr);
  const int vs = av_find_best_stream(fmt.get(), AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
  if (vs < 0) throw std::runtime_error("no video");
  const AVCodec* codec = avcodec_find_decoder(fmt->streams[vs]->codecpar->codec_id);
  std::unique_ptr<AVCodecContext, CodecFreer> ctx(avcodec_alloc_context3(codec));
  avcodec_parameters_to_context(ctx.get(), fmt->streams[vs]->codecpar);
  ctx->thread_count = 1;
  if (avcodec_open2(ctx.get(), codec, nullptr) < 0) throw std::runtime_error("codec");
  std::unique_ptr<AVPacket, PacketFreer> pkt(av_packet_alloc());
  std::unique_ptr<AVFrame, FrameFreer> frame(av_frame_alloc());
  std::unique_ptr<SwsContext, SwsDeleter> sws;
  std::int64_t n = 0;
  std::size_t k = 0;
  auto drain = [&] {
    while (avcodec_receive_frame(ctx.get(), frame.get()) == 0) {
      for (; k < wanted.size() && wanted[k] == n; ++k) {
        sws.reset(sws_getCachedContext(sws.release(), frame->width, frame->height,
                                       AVPixelFormat(frame->format), 224, 224, AV_PIX_FMT_RGB24,
                                       SWS_BILINEAR | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT,
                                       nullptr, nullptr, nullptr));
        std::uint8_t* dst[1] = {out + k * 224 * 224 * 3};
        const int stride[1] = {224 * 3};
        sws_scale(sws.get(), frame->data, frame->linesize, 0, frame->height, dst, stride);
      }
      ++n;
    }
  };
  while (av_read_frame(fmt.get(), pkt.get()) >= 0) {
    if (pkt->stream_index == vs) avcodec_send_packet(ctx.get(), pkt.get());
    av_packet_unref(pkt.get());
    drain();
  }
  avcodec_send_packet(ctx.get(), nullptr);
  drain();
  if (k != wanted.size()) throw std::runtime_error("missing frames in " + path);
}

// What load_video decoded, summed over the clips: how much it skipped.
std::string decode_stats_json(const std::vector<Bytes>& files,
                              const std::vector<std::string>& paths, bm::VideoOptions opts) {
  bm::DecodeStats sum, one;
  opts.stats = &one;
  for (std::size_t i = 0; i < files.size(); ++i) {
    bm::load_video(bm::Source::memory(files[i], paths[i]), opts);
    sum.packets += one.packets;
    sum.packets_skippable += one.packets_skippable;
    sum.frames += one.frames;
    sum.seeks += one.seeks;
  }
  std::fprintf(stderr,
               "brigade decode stats: packets %ld, sent skippable %ld, frames %ld, seeks %ld\n",
               long(sum.packets), long(sum.packets_skippable), long(sum.frames), long(sum.seeks));
  return ",\"packets\":" + std::to_string(sum.packets) +
         ",\"packets_skippable\":" + std::to_string(sum.packets_skippable) +
         ",\"frames_decoded\":" + std::to_string(sum.frames) +
         ",\"seeks\":" + std::to_string(sum.seeks);
}

int bench_videos(const Args& a) {
  std::vector<std::string> paths;
  std::filesystem::path tmp;
  std::string clip_desc = ",\"clips_from\":\"list\"";
  if (a.list.empty()) {
    const bool x264 = a.video_profile == "x264-default";
    bm::VideoSpec spec{.codec = bm::VideoCodec::h264,
                       .width = a.width > 0 ? a.width : (x264 ? 640 : 320),
                       .height = a.height > 0 ? a.height : (x264 ? 360 : 240),
                       .frames = 0,
                       .fps = a.fps > 0 ? a.fps : (x264 ? 30 : 25),
                       .gop = 50,
                       .b_frames = 2,
                       .seed = 0,
                       .profile = x264 ? bm::VideoProfile::x264_default : bm::VideoProfile::fast};
    spec.frames =
        int(std::lround((a.clip_seconds > 0 ? a.clip_seconds : (x264 ? 2.0 : 10.0)) * spec.fps));
    clip_desc =
        ",\"video_profile\":\"" + a.video_profile + "\",\"width\":" + std::to_string(spec.width) +
        ",\"height\":" + std::to_string(spec.height) + ",\"fps\":" + std::to_string(spec.fps) +
        ",\"clip_frames\":" + std::to_string(spec.frames);
    tmp = a.write_dir.empty() ? std::filesystem::temp_directory_path() /
                                    ("bench_decode_" + std::to_string(getpid()))
                              : std::filesystem::path(a.write_dir);
    std::filesystem::create_directories(tmp);
    for (int i = 0; i < a.clips; ++i) {
      spec.seed = std::uint64_t(i);
      const Bytes clip = bm::make_video(spec);
      paths.push_back((tmp / ("clip" + std::to_string(i) + ".mp4")).string());
      bm::write_file(paths.back(), clip);
    }
    if (!a.write_dir.empty()) return 0;
  } else {
    paths = read_list(a.list);
  }
  std::vector<Bytes> files;
  std::vector<std::vector<std::int64_t>> wanted;
  for (const auto& p : paths) {
    files.push_back(bm::read_file(p));
    wanted.push_back(eight_indices(bm::probe_video(bm::Source::memory(files.back(), p)).frames));
  }
  std::fprintf(stderr, "clips: %zu\n", files.size());
  bm::VideoOptions opts;
  opts.frames = bm::FrameSelection::evenly_spaced(8);
  opts.image.resize = bm::ResizeMode::stretch;
  opts.image.width = opts.image.height = 224;
  opts.threads = 1;
  std::vector<Impl> impls = {
      {[&](std::size_t i) { bm::load_video(bm::Source::memory(files[i], paths[i]), opts); },
       files.size()},
      {[&](std::size_t i) {
         std::vector<std::uint8_t> out(8 * 224 * 224 * 3);
         libav_sequential(paths[i], wanted[i], out.data());
       },
       files.size()}};
  const bool have_cli = std::system("command -v ffmpeg >/dev/null 2>&1") == 0;
  if (have_cli) {
    impls.push_back(
        {[&](std::size_t i) {
           std::string select;
           for (auto n : wanted[i])
             select += (select.empty() ? "" : "+") + ("eq(n\\," + std::to_string(n) + ")");
           const std::string cmd =
               "ffmpeg -nostdin -loglevel error -threads 1 -i '" + paths[i] +
               "' -filter_threads 1 -vf \"select='" + select +
               "',scale=224:224:flags=bilinear\" -vsync 0 -pix_fmt rgb24 -f rawvideo -y /dev/null";
           if (std::system(cmd.c_str()) != 0)
             throw std::runtime_error("ffmpeg failed on " + paths[i]);
         },
         files.size(), true});
  } else {
    std::fprintf(stderr, "ffmpeg CLI not installed: no ffmpeg-cli row\n");
  }
  const std::vector<Result> results = run(impls, a.threads, a.seconds);
  const Result& ours = results[0];
  const Result& seq = results[1];
  report("brigade", "video", "clip8x224", a.threads, ours, "clips",
         (double(ours.items) / ours.seconds) / (double(seq.items) / seq.seconds),
         clip_desc + decode_stats_json(files, paths, opts));
  report("libav-sequential", "video", "clip8x224", a.threads, seq, "clips", 0, clip_desc);
  if (have_cli)
    report("ffmpeg-cli", "video", "clip8x224", a.threads, results[2], "clips", 0, clip_desc);
  if (!tmp.empty()) std::filesystem::remove_all(tmp);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  try {
    if (a.kind == "video") return bench_videos(a);
    return a.op == "train224" ? bench_train(a) : bench_images(a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_decode: %s\n", e.what());
    return 1;
  }
}
