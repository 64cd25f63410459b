// A small launcher of our own for vLLM v0.10.2's CUDA paged-attention and cache-write kernels.
//
// The kernels themselves are not copied here: this file #includes them from an unpacked vLLM
// v0.10.2 sdist (the build passes `-I <sdist>/csrc`). vLLM's full build compiles every head size,
// block size, dtype and fp8 variant, which takes far too long on a borrowed GPU; this launcher
// instantiates only the configurations the GPU lane tests:
//
//   head size 64 or 128  x  block size 8, 16 or 32  x  fp32 / fp16 / bf16,  no fp8, no block-sparse.
//
// The Python signatures match vllm._custom_ops (paged_attention_v1/v2 with the block-sparse
// arguments dropped; reshape_and_cache/_flash exactly), so the same checks drive either.

#include <torch/extension.h>

#include "attention/attention_kernels.cuh"
#include "cache_kernels.cu"  // defines the reshape_and_cache(_flash) host entry points

namespace pastudy {

constexpr int kThreads = 128;        // vLLM's NUM_THREADS for both versions
constexpr int kPartitionSize = 512;  // vLLM's PARTITION_SIZE for v2

using vllm::Fp8KVCacheDataType;

int warps() { return kThreads / WARP_SIZE; }

template <typename T, int HEAD, int BLOCK>
void launch_v1(torch::Tensor& out, torch::Tensor& query, torch::Tensor& key_cache,
               torch::Tensor& value_cache, int num_kv_heads, float scale,
               torch::Tensor& block_tables, torch::Tensor& seq_lens, int max_seq_len,
               const float* alibi, const float* k_scale, const float* v_scale) {
  const int num_seqs = query.size(0), num_heads = query.size(1);
  // Shared memory holds every logit of the longest sequence, or the cross-warp output sums.
  const int padded_len = (max_seq_len + BLOCK - 1) / BLOCK * BLOCK;
  const int smem = std::max<int>(padded_len * sizeof(float), (warps() / 2) * HEAD * sizeof(float));
  auto kernel = vllm::paged_attention_v1_kernel<T, T, HEAD, BLOCK, kThreads,
                                                Fp8KVCacheDataType::kAuto, false>;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  const at::cuda::OptionalCUDAGuard guard(device_of(query));
  kernel<<<dim3(num_heads, num_seqs, 1), dim3(kThreads), smem,
           at::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<T*>(out.data_ptr()), reinterpret_cast<T*>(query.data_ptr()),
      reinterpret_cast<T*>(key_cache.data_ptr()), reinterpret_cast<T*>(value_cache.data_ptr()),
      num_kv_heads, scale, block_tables.data_ptr<int>(), seq_lens.data_ptr<int>(),
      block_tables.size(1), alibi, query.stride(0), key_cache.stride(0), key_cache.stride(1),
      k_scale, v_scale, 0, 0, 0, 0, 0);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T, int HEAD, int BLOCK>
void launch_v2(torch::Tensor& out, torch::Tensor& exp_sums, torch::Tensor& max_logits,
               torch::Tensor& tmp_out, torch::Tensor& query, torch::Tensor& key_cache,
               torch::Tensor& value_cache, int num_kv_heads, float scale,
               torch::Tensor& block_tables, torch::Tensor& seq_lens, int max_seq_len,
               const float* alibi, const float* k_scale, const float* v_scale) {
  const int num_seqs = query.size(0), num_heads = query.size(1);
  const int partitions = (max_seq_len + kPartitionSize - 1) / kPartitionSize;
  const int smem = std::max<int>(kPartitionSize * sizeof(float),
                                 (warps() / 2) * HEAD * sizeof(float));
  const int reduce_smem = 2 * partitions * sizeof(float);
  const at::cuda::OptionalCUDAGuard guard(device_of(query));
  auto stream = at::cuda::getCurrentCUDAStream();
  vllm::paged_attention_v2_kernel<T, T, HEAD, BLOCK, kThreads, Fp8KVCacheDataType::kAuto, false,
                                  kPartitionSize>
      <<<dim3(num_heads, num_seqs, partitions), dim3(kThreads), smem, stream>>>(
          exp_sums.data_ptr<float>(), max_logits.data_ptr<float>(),
          reinterpret_cast<T*>(tmp_out.data_ptr()), reinterpret_cast<T*>(query.data_ptr()),
          reinterpret_cast<T*>(key_cache.data_ptr()),
          reinterpret_cast<T*>(value_cache.data_ptr()), num_kv_heads, scale,
          block_tables.data_ptr<int>(), seq_lens.data_ptr<int>(), block_tables.size(1), alibi,
          query.stride(0), key_cache.stride(0), key_cache.stride(1), k_scale, v_scale, 0, 0, 0,
          0, 0);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  vllm::paged_attention_v2_reduce_kernel<T, HEAD, kThreads, kPartitionSize>
      <<<dim3(num_heads, num_seqs), dim3(kThreads), reduce_smem, stream>>>(
          reinterpret_cast<T*>(out.data_ptr()), exp_sums.data_ptr<float>(),
          max_logits.data_ptr<float>(), reinterpret_cast<T*>(tmp_out.data_ptr()),
          seq_lens.data_ptr<int>(), partitions);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Pick the template instance for (dtype, head size, block size) or fail with a clear message.
#define PASTUDY_DISPATCH(FN, ...)                                                           \
  [&] {                                                                                     \
    const int hs = query.size(2);                                                           \
    TORCH_CHECK(hs == 64 || hs == 128, "launcher built for head sizes 64/128, got ", hs);   \
    TORCH_CHECK(block_size == 8 || block_size == 16 || block_size == 32,                    \
                "launcher built for block sizes 8/16/32, got ", block_size);                \
    auto dt = query.scalar_type();                                                          \
    if (dt == at::ScalarType::Float) return FN##_dt<float>(hs, block_size, __VA_ARGS__);    \
    if (dt == at::ScalarType::Half) return FN##_dt<uint16_t>(hs, block_size, __VA_ARGS__);  \
    if (dt == at::ScalarType::BFloat16)                                                     \
      return FN##_dt<__nv_bfloat16>(hs, block_size, __VA_ARGS__);                           \
    TORCH_CHECK(false, "launcher built for fp32/fp16/bf16, got ", dt);                      \
  }()

template <typename T, typename... Args>
void launch_v1_dt(int hs, int bs, Args&&... args) {
  if (hs == 64 && bs == 8) return launch_v1<T, 64, 8>(args...);
  if (hs == 64 && bs == 16) return launch_v1<T, 64, 16>(args...);
  if (hs == 64 && bs == 32) return launch_v1<T, 64, 32>(args...);
  if (hs == 128 && bs == 8) return launch_v1<T, 128, 8>(args...);
  if (hs == 128 && bs == 16) return launch_v1<T, 128, 16>(args...);
  return launch_v1<T, 128, 32>(args...);
}

template <typename T, typename... Args>
void launch_v2_dt(int hs, int bs, Args&&... args) {
  if (hs == 64 && bs == 8) return launch_v2<T, 64, 8>(args...);
  if (hs == 64 && bs == 16) return launch_v2<T, 64, 16>(args...);
  if (hs == 64 && bs == 32) return launch_v2<T, 64, 32>(args...);
  if (hs == 128 && bs == 8) return launch_v2<T, 128, 8>(args...);
  if (hs == 128 && bs == 16) return launch_v2<T, 128, 16>(args...);
  return launch_v2<T, 128, 32>(args...);
}

const float* optional_ptr(const std::optional<torch::Tensor>& t) {
  return t ? t->data_ptr<float>() : nullptr;
}

void paged_attention_v1(torch::Tensor out, torch::Tensor query, torch::Tensor key_cache,
                        torch::Tensor value_cache, int64_t num_kv_heads, double scale,
                        torch::Tensor block_tables, torch::Tensor seq_lens, int64_t block_size,
                        int64_t max_seq_len, std::optional<torch::Tensor> alibi_slopes,
                        std::string kv_cache_dtype, torch::Tensor k_scale,
                        torch::Tensor v_scale) {
  TORCH_CHECK(kv_cache_dtype == "auto", "launcher built without fp8 caches");
  PASTUDY_DISPATCH(launch_v1, out, query, key_cache, value_cache, (int)num_kv_heads,
                   (float)scale, block_tables, seq_lens, (int)max_seq_len,
                   optional_ptr(alibi_slopes), k_scale.data_ptr<float>(),
                   v_scale.data_ptr<float>());
}

void paged_attention_v2(torch::Tensor out, torch::Tensor exp_sums, torch::Tensor max_logits,
                        torch::Tensor tmp_out, torch::Tensor query, torch::Tensor key_cache,
                        torch::Tensor value_cache, int64_t num_kv_heads, double scale,
                        torch::Tensor block_tables, torch::Tensor seq_lens, int64_t block_size,
                        int64_t max_seq_len, std::optional<torch::Tensor> alibi_slopes,
                        std::string kv_cache_dtype, torch::Tensor k_scale,
                        torch::Tensor v_scale) {
  TORCH_CHECK(kv_cache_dtype == "auto", "launcher built without fp8 caches");
  PASTUDY_DISPATCH(launch_v2, out, exp_sums, max_logits, tmp_out, query, key_cache, value_cache,
                   (int)num_kv_heads, (float)scale, block_tables, seq_lens, (int)max_seq_len,
                   optional_ptr(alibi_slopes), k_scale.data_ptr<float>(),
                   v_scale.data_ptr<float>());
}

}  // namespace pastudy

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("paged_attention_v1", &pastudy::paged_attention_v1);
  m.def("paged_attention_v2", &pastudy::paged_attention_v2);
  m.def("reshape_and_cache", &reshape_and_cache);              // vLLM's host function
  m.def("reshape_and_cache_flash", &reshape_and_cache_flash);  // vLLM's host function
  m.attr("partition_size") = pastudy::kPartitionSize;
}
