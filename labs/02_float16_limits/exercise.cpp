// Lab 02 exercise stubs: replace each body, then run ./lab test (see README.md).
#include "exercise.h"

#include "common/errors.h"

namespace lab02 {

template <typename T>
float round_to(float /*x*/) {
  // TODO(lab02): store x in a T, then read it back as a float.
  speedlabs::not_implemented("02", "02_float16_limits", "round_to<T>");
}

template <typename T>
float add_in(float /*a*/, float /*b*/) {
  // TODO(lab02): make both operands T first, add them as T, read the sum back as a float.
  speedlabs::not_implemented("02", "02_float16_limits", "add_in<T>");
}

template <typename T>
float accumulate_updates(float /*weight*/, float /*update*/, int /*steps*/) {
  // TODO(lab02): keep the weight in a T and add the update (also a T) to it steps times.
  speedlabs::not_implemented("02", "02_float16_limits", "accumulate_updates<T>");
}

}  // namespace lab02

LAB02_INSTANTIATE_EXERCISE()
