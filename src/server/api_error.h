// ApiError: an HTTP error answered with OpenAI's error object
// {"error": {"message", "type", "param", "code"}}.
#pragma once
#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace gs {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = "", std::string type = "invalid_request_error",
           std::string code = "")
      : std::runtime_error(message),
        status_(status),
        param_(std::move(param)),
        type_(std::move(type)),
        code_(code.empty() ? nlohmann::json(nullptr) : nlohmann::json(std::move(code))) {}

  // vLLM's answer to a completion or chat request whose "model" is neither the served model nor a
  // loaded adapter: 404, type NotFoundError, the status as the code.
  static ApiError model_not_found(const std::string& model) {
    ApiError e(404, "The model `" + model + "` does not exist.", "model", "NotFoundError");
    e.code_ = 404;
    return e;
  }

  int status() const { return status_; }
  const std::string& param() const { return param_; }

  nlohmann::json to_json() const {
    nlohmann::json e = {{"message", what()}, {"type", type_}};
    e["param"] = param_.empty() ? nlohmann::json(nullptr) : nlohmann::json(param_);
    e["code"] = code_;
    return {{"error", e}};
  }

 private:
  int status_;
  std::string param_, type_;
  nlohmann::json code_;  // a string, a number (vLLM's status codes) or null
};

// A 400 naming the offending parameter.
[[noreturn]] inline void bad_param(const std::string& param, const std::string& message) {
  throw ApiError(400, message, param);
}

}  // namespace gs
