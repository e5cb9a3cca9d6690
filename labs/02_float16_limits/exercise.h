/// @file labs/02_float16_limits/exercise.h
/// @brief Lab 02 exercise: the rounding experiments, written once for every number type.
///
/// Each function is a template over the storage type T. It is compiled (explicitly instantiated)
/// for float, Eigen::half, Eigen::bfloat16, at::Half and at::BFloat16, so the same code runs the
/// lesson's experiments in both libraries and the lab can check that they agree.
/// Values go in and come out as float: every float16 and bfloat16 value, infinity included, is
/// exactly a float, so returning float loses nothing and shows exactly what T stored.
///
/// Stubs live in labs/02_float16_limits/exercise.cpp, the reference in
/// solutions/02_float16_limits/exercise.cpp.
#pragma once
#include <Eigen/Core>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

namespace lab02 {

/// The value @p x becomes when it is stored in T.
///
/// Rounds to the nearest value T can hold, ties to the one with an even last bit; a value beyond
/// T's largest finite number becomes infinity, one below half its smallest step becomes zero.
/// @tparam T  float, Eigen::half, Eigen::bfloat16, at::Half or at::BFloat16
/// @param x   the value to store
/// @return    the stored value, as a float
template <typename T>
float round_to(float x);

/// @p a plus @p b, computed the way a tensor of type T would: both stored in T, added, the sum stored in T.
///
/// Careful: at::Half + float is a float in libtorch, so both operands must be T before the addition.
/// @tparam T  float, Eigen::half, Eigen::bfloat16, at::Half or at::BFloat16
/// @param a   the first operand (e.g. a weight)
/// @param b   the second operand (e.g. an update)
/// @return    the sum as T stored it, as a float
template <typename T>
float add_in(float a, float b);

/// A weight kept in T that receives the same small update @p steps times, like an optimizer would.
///
/// The weight and the update are both stored in T, and the weight is stored in T again after every
/// addition: this is what happens to weights that are not kept as float32 master weights.
/// @tparam T       float, Eigen::half, Eigen::bfloat16, at::Half or at::BFloat16
/// @param weight   the starting weight
/// @param update   what is added at each step (e.g. learning rate times gradient)
/// @param steps    how many updates (0 or more)
/// @return         the final weight, as a float
template <typename T>
float accumulate_updates(float weight, float update, int steps);

}  // namespace lab02

/// Explicitly instantiates the exercise functions for every type the lab uses.
/// exercise.cpp (the stubs and the solution alike) ends with this one line, so the list of
/// types is written once.
#define LAB02_INSTANTIATE_EXERCISE()                                                         \
  LAB02_INSTANTIATE_FOR(float)                                                               \
  LAB02_INSTANTIATE_FOR(Eigen::half)                                                         \
  LAB02_INSTANTIATE_FOR(Eigen::bfloat16)                                                     \
  LAB02_INSTANTIATE_FOR(at::Half)                                                            \
  LAB02_INSTANTIATE_FOR(at::BFloat16)

/// The three exercise functions instantiated for one type @p T (used by LAB02_INSTANTIATE_EXERCISE).
#define LAB02_INSTANTIATE_FOR(T)                                                             \
  template float lab02::round_to<T>(float);                                                  \
  template float lab02::add_in<T>(float, float);                                             \
  template float lab02::accumulate_updates<T>(float, float, int);
