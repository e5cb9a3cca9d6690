// Lab 02 reference solution.
#include "exercise.h"

namespace lab02 {

template <typename T>
float round_to(float x) {
  return static_cast<float>(T(x));
}

template <typename T>
float add_in(float a, float b) {
  const T sum = T(a) + T(b);  // T + T stays T in Eigen and in libtorch; T + float would not
  return static_cast<float>(sum);
}

template <typename T>
float accumulate_updates(float weight, float update, int steps) {
  T stored(weight);
  const T step(update);
  for (int i = 0; i < steps; ++i) stored = stored + step;
  return static_cast<float>(stored);
}

}  // namespace lab02

LAB02_INSTANTIATE_EXERCISE()
