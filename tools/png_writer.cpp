// 8-bit RGB PNG files (tools/png_writer.h). Linked with libtorch, so no
// std::filesystem here (libtorch exports incompatible copies of it): stdio
// over the descriptor of a files::AtomicFile, obsaug's one atomic write.
#include "tools/png_writer.h"

#include <png.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "files/atomic_file.h"
#include "files/bounded_file.h"

namespace obsaug::cli {
namespace {

// libpng's error: its message (and the system's reason, for a failed
// write) kept for the exception instead of printed, then back to setjmp.
void keep_error(png_structp png, png_const_charp message) {
  auto* kept = static_cast<std::string*>(png_get_error_ptr(png));
  *kept = std::string(message) + (errno != 0 ? std::string(" (") + std::strerror(errno) + ")" : "");
  png_longjmp(png, 1);
}

void ignore_warning(png_structp, png_const_charp) {}

// Writes `image` to `file` with libpng; "" or libpng's error.
std::string write_rows(const RgbImage& image, FILE* file) {
  std::string error = "out of memory";
  errno = 0;
  png_structp png =
      png_create_write_struct(PNG_LIBPNG_VER_STRING, &error, &keep_error, &ignore_warning);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return error;
  }
  png_init_io(png, file);
  png_set_IHDR(png, info, static_cast<png_uint_32>(image.width),
               static_cast<png_uint_32>(image.height), 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int64_t y = 0; y < image.height; ++y)
    png_write_row(png, const_cast<png_bytep>(&image.rgb[y * image.width * 3]));
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return "";
}

}  // namespace

void write_png(const RgbImage& image, const std::string& path) {
  try {
    files::AtomicFile out(path);  // the temporary beside `path`; removed unless committed
    const int fd = ::dup(out.fd());
    std::unique_ptr<FILE, int (*)(FILE*)> file(fd >= 0 ? ::fdopen(fd, "wb") : nullptr,
                                               &std::fclose);
    if (!file) {
      if (fd >= 0) ::close(fd);
      throw files::FileError(out.temporary(),
                             std::string("cannot open (") + std::strerror(errno) + ")");
    }
    const std::string error = write_rows(image, file.get());
    if (!error.empty()) throw files::FileError(out.temporary(), "libpng failed: " + error);
    if (std::fclose(file.release()) != 0) {
      throw files::FileError(out.temporary(),
                             std::string("cannot write (") + std::strerror(errno) + ")");
    }
    out.commit();
  } catch (const files::FileError& e) {
    throw std::runtime_error("cannot write " + path + ": " + e.reason());
  }
}

}  // namespace obsaug::cli
