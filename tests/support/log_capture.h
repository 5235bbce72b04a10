// Captures gdx's log lines for the duration of a test, into a private file, with the once-per-process keys
// forgotten (a line logged once by an earlier test shows again); afterwards the log goes back to stderr at warn.
// Tests that check a cause is named in the log (bad input, refused paths) read it with text() or count().
#pragma once

#include "core/log.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

namespace gdx::test {

class LogCapture {
  public:
    explicit LogCapture(log::Level level = log::Level::Info) {
        std::string tmpl = ::testing::TempDir() + "/gdx-test-log.XXXXXX";
        int fd = mkstemp(tmpl.data());
        EXPECT_GE(fd, 0) << "mkstemp " << tmpl;
        if (fd >= 0) close(fd);
        path_ = tmpl;
        std::string why;
        EXPECT_TRUE(log::configure(level, path_, &why)) << why;
        log::reset_once_keys();
    }
    ~LogCapture() {
        std::string why;
        log::configure(log::Level::Warn, "stderr", &why);
        unlink(path_.c_str());
    }
    LogCapture(const LogCapture &) = delete;
    LogCapture &operator=(const LogCapture &) = delete;

    std::string text() const {
        std::ifstream f(path_);
        std::stringstream s;
        s << f.rdbuf();
        return s.str();
    }
    // How many times `needle` occurs in what was logged.
    size_t count(const std::string &needle) const {
        const std::string t = text();
        size_t n = 0;
        for (size_t p = t.find(needle); p != std::string::npos; p = t.find(needle, p + 1)) ++n;
        return n;
    }

  private:
    std::string path_;
};

} // namespace gdx::test
