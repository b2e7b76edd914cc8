#include "libs/store/value.hpp"

namespace loom::store {

std::string_view kind_name(const value& v) {
  switch (v.index()) {
    case 0: return "null";
    case 1: return "int64";
    case 2: return "double";
    case 3: return "text";
    default: return "blob";
  }
}

bool row::is_null(std::size_t i) const { return std::holds_alternative<std::monostate>(values_[i]); }

template <class T>
result<T> row::typed(std::size_t i) const {
  if (i >= values_.size()) {
    return make_error(errc::invalid_argument, "column " + std::to_string(i) + " out of range (row has " +
                                                  std::to_string(values_.size()) + ")");
  }
  const value& v = values_[i];
  if (const T* p = std::get_if<T>(&v)) return *p;
  if constexpr (std::is_same_v<T, double>) {
    if (const auto* p = std::get_if<std::int64_t>(&v)) return static_cast<double>(*p);
  }
  const std::string& name = i < names_->size() ? (*names_)[i] : std::string("?");
  return make_error(errc::invalid_argument, "column '" + name + "' holds " + std::string(kind_name(v)) +
                                                ", not " + std::string(kind_name(value(T{}))));
}

result<std::int64_t> row::get_i64(std::size_t i) const { return typed<std::int64_t>(i); }
result<double> row::get_f64(std::size_t i) const { return typed<double>(i); }
result<std::string> row::get_text(std::size_t i) const { return typed<std::string>(i); }
result<blob> row::get_blob(std::size_t i) const { return typed<blob>(i); }

result<std::size_t> row::index_of(std::string_view column) const {
  for (std::size_t i = 0; i < names_->size(); ++i) {
    if ((*names_)[i] == column) return i;
  }
  return make_error(errc::invalid_argument, "no column '" + std::string(column) + "' in the result");
}

result<bool> row::is_null(std::string_view column) const {
  auto i = index_of(column);
  if (!i.ok()) return i.err();
  return is_null(*i);
}

#define LOOM_STORE_BY_NAME(T, fn)                             \
  result<T> row::fn(std::string_view column) const {          \
    auto i = index_of(column);                                \
    if (!i.ok()) return i.err();                              \
    return typed<T>(*i);                                      \
  }
LOOM_STORE_BY_NAME(std::int64_t, get_i64)
LOOM_STORE_BY_NAME(double, get_f64)
LOOM_STORE_BY_NAME(std::string, get_text)
LOOM_STORE_BY_NAME(blob, get_blob)
#undef LOOM_STORE_BY_NAME

}  // namespace loom::store
