#include "common/errors.h"

namespace speedlabs {

void not_implemented(const std::string& lab, const std::string& folder, const std::string& what) {
  throw NotImplementedError("not implemented yet: TODO(lab" + lab + ") " + what + " -- see labs/" + folder +
                            "/README.md");
}

}  // namespace speedlabs
