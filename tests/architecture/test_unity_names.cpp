// The unity build compiles several sources of src/ as one file, and which ones share a batch changes as
// files come and go: two file-local helpers of the same name would then collide in a build that only
// happens to batch them together. Every name in an anonymous namespace of src/ is unique across src/.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

namespace fs = std::filesystem;

namespace {

// Names defined at the top level of the anonymous namespaces of `file`: functions, types and constants.
std::set<std::string> file_local_names(const fs::path& file) {
  static const std::regex function(R"(^[A-Za-z_][\w:<>,\s\*&]*[\s\*&](\w+)\()");
  static const std::regex type(R"(^(?:struct|class|enum class|enum)\s+(\w+)|^using\s+(\w+)\s*=)");
  static const std::regex constant(
      R"(^(?:inline\s+)?(?:static\s+)?(?:constexpr|const)\s[^=(]*?\b(\w+)\s*(?:=|\{|\[))");
  std::set<std::string> names;
  std::ifstream in(file);
  bool local = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("namespace {", 0) == 0) {
      local = true;
    } else if (local && line.rfind("}  // namespace", 0) == 0) {
      local = false;
    } else if (local) {
      if (line.rfind("return", 0) == 0 || line.rfind("static_assert", 0) == 0) continue;
      std::smatch m;
      if (std::regex_search(line, m, type) || std::regex_search(line, m, constant) ||
          std::regex_search(line, m, function))
        names.insert(m[1].matched ? m[1].str() : m[2].str());
    }
  }
  return names;
}

}  // namespace

CATCH_TEST_CASE("unity build: no two sources of src/ define a file-local name twice",
                "[unit][architecture]") {
  const fs::path src = fs::path(CAUSAL_SOURCE_DIR) / "src";
  std::map<std::string, std::set<std::string>> defined_in;
  size_t names = 0;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    if (entry.path().extension() != ".cpp") continue;
    for (const std::string& name : file_local_names(entry.path())) {
      defined_in[name].insert(fs::relative(entry.path(), src).string());
      ++names;
    }
  }
  CATCH_REQUIRE(names > 100);  // the scan found the helpers
  for (const auto& [name, files] : defined_in) {
    CATCH_INFO(name << " is defined in " << files.size() << " files, e.g. " << *files.begin() << " and "
                    << *files.rbegin() << ": rename one (or share it through a header)");
    CATCH_CHECK(files.size() == 1);
  }
}

CATCH_TEST_CASE("unity build: the scan finds functions, types and constants", "[unit][architecture]") {
  const fs::path file = fs::temp_directory_path() / "causal_unity_scan.cpp";
  std::ofstream(file) << "namespace {\n\nconstexpr int kLimit = 3;\nstruct Row {\n  int a;\n};\n"
                         "std::string where(const std::string& path) {\n  return path;\n}\n"
                         "}  // namespace\n\nint visible() { return 0; }\n";
  CATCH_CHECK(file_local_names(file) == std::set<std::string>{"kLimit", "Row", "where"});
  fs::remove(file);
}
