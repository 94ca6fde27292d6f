// The kept firmware log and its subscribers (log_stream.h).
#include "vtrn/drv/log_stream.h"

#include "vtrn/drv/host_interface.h"

namespace drv {

void LogStream::add(std::vector<std::string> lines, uint64_t lost) {
  if (lines.empty() && lost == 0) return;
  for (std::string& l : lines) {
    l = printable(l);
    history_.push_back(l);
    if (history_.size() > keep_) history_.pop_front();
  }
  const auto listeners = listeners_;  // a listener may unsubscribe itself
  for (const auto& [id, l] : listeners) l(lines, lost);
}

std::vector<std::string> LogStream::last(size_t n) const {
  const size_t from = history_.size() > n ? history_.size() - n : 0;
  return std::vector<std::string>(history_.begin() + ptrdiff_t(from), history_.end());
}

int LogStream::subscribe(Listener l) {
  const int id = next_++;
  listeners_[id] = std::move(l);
  return id;
}

}  // namespace drv
