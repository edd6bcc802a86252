# Every dependency is a Debian package (scripts/bootstrap.sh installs them).
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
# Boost.Beast and Boost.Asio (header-only, libboost-dev): the HTTP server.
find_package(Boost 1.74 REQUIRED)
# cpp-httplib: the HTTP client of `bench serve` and of the tests. Debian builds the library with
# OpenSSL, zlib and Brotli support; its users must compile with the same macros (from its .pc),
# or httplib's classes have another layout in their code than in the library.
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
if(GS_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(GS_BUILD_BENCH)
  find_package(benchmark QUIET)
endif()
