#pragma once
// RAII owners for FFmpeg objects. Deleters are defined out of line (wrappers.cc)
// so that this header needs only forward declarations.

#include <memory>

extern "C" {
struct AVFormatContext;
struct AVCodecContext;
struct AVFrame;
struct AVPacket;
struct AVIOContext;
struct AVFilterGraph;
struct AVFilterInOut;
struct SwsContext;
struct SwrContext;
}

namespace brigade::media::detail {

struct InputFormatContextDeleter {
  void operator()(AVFormatContext* p) const;
};  // avformat_close_input
struct OutputFormatContextDeleter {
  void operator()(AVFormatContext* p) const;
};  // avformat_free_context
struct CodecContextDeleter {
  void operator()(AVCodecContext* p) const;
};
struct FrameDeleter {
  void operator()(AVFrame* p) const;
};
struct PacketDeleter {
  void operator()(AVPacket* p) const;
};
struct IOContextDeleter {
  void operator()(AVIOContext* p) const;
};  // frees its buffer too
struct FilterGraphDeleter {
  void operator()(AVFilterGraph* p) const;
};
struct FilterInOutDeleter {
  void operator()(AVFilterInOut* p) const;
};
struct SwsContextDeleter {
  void operator()(SwsContext* p) const;
};
struct SwrContextDeleter {
  void operator()(SwrContext* p) const;
};

using InputFormatContextPtr = std::unique_ptr<AVFormatContext, InputFormatContextDeleter>;
using OutputFormatContextPtr = std::unique_ptr<AVFormatContext, OutputFormatContextDeleter>;
using CodecContextPtr = std::unique_ptr<AVCodecContext, CodecContextDeleter>;
using FramePtr = std::unique_ptr<AVFrame, FrameDeleter>;
using PacketPtr = std::unique_ptr<AVPacket, PacketDeleter>;
using IOContextPtr = std::unique_ptr<AVIOContext, IOContextDeleter>;
using FilterGraphPtr = std::unique_ptr<AVFilterGraph, FilterGraphDeleter>;
using FilterInOutPtr = std::unique_ptr<AVFilterInOut, FilterInOutDeleter>;
using SwsContextPtr = std::unique_ptr<SwsContext, SwsContextDeleter>;
using SwrContextPtr = std::unique_ptr<SwrContext, SwrContextDeleter>;

// Allocating constructors; they throw std::bad_alloc instead of returning null.
FramePtr make_frame();
PacketPtr make_packet();

}  // namespace brigade::media::detail
