#include "media/detail/ffmpeg/wrappers.h"

#include <new>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavfilter/avfilter.h>
#include <libavformat/avformat.h>
#include <libavutil/frame.h>
#include <libswresample/swresample.h>
#include <libswscale/swscale.h>
}

namespace brigade::media::detail {

void InputFormatContextDeleter::operator()(AVFormatContext* p) const { avformat_close_input(&p); }
void OutputFormatContextDeleter::operator()(AVFormatContext* p) const { avformat_free_context(p); }
void CodecContextDeleter::operator()(AVCodecContext* p) const { avcodec_free_context(&p); }
void FrameDeleter::operator()(AVFrame* p) const { av_frame_free(&p); }
void PacketDeleter::operator()(AVPacket* p) const { av_packet_free(&p); }
void IOContextDeleter::operator()(AVIOContext* p) const {
  if (p != nullptr) av_freep(&p->buffer);
  avio_context_free(&p);
}
void FilterGraphDeleter::operator()(AVFilterGraph* p) const { avfilter_graph_free(&p); }
void FilterInOutDeleter::operator()(AVFilterInOut* p) const { avfilter_inout_free(&p); }
void SwsContextDeleter::operator()(SwsContext* p) const { sws_freeContext(p); }
void SwrContextDeleter::operator()(SwrContext* p) const { swr_free(&p); }

FramePtr make_frame() {
  FramePtr f(av_frame_alloc());
  if (!f) throw std::bad_alloc();
  return f;
}

PacketPtr make_packet() {
  PacketPtr p(av_packet_alloc());
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace brigade::media::detail
