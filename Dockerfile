# One image for every role: `gpustack-operator worker`, `gpustack-operator device-manager serve` and the
# device manager's init container, which copies /opt/gpustack/lib (the sliced-GPU preload libraries) onto the
# node under <GPUSTACK_DATA_DIR>/operator/lib/ (charts/gpustack-operator/templates/device-manager/daemonset.yaml).
#
#   make image [IMAGE=registry/gpustack-operator:tag]
#
# Base images are pinned by tag; the HAMi-core source by commit.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG CUDA_IMAGE=nvidia/cuda:12.4.1-devel-ubuntu22.04

# ---- the Python package and its dependencies as wheels ----
FROM ${PYTHON_IMAGE} AS builder
WORKDIR /src
COPY pyproject.toml setup.cfg README.md ./
COPY src ./src
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

# ---- HAMi-core (libvgpu.so): CUDA compute and memory limits of sliced NVIDIA containers (contract §8) ----
FROM ${CUDA_IMAGE} AS hami-core-cuda-12
# Project-HAMi/HAMi-core at a pinned commit (no submodule); bump it deliberately and rebuild.
ARG HAMI_CORE_COMMIT=137d156374155e3d23adca792900b0d1c6a12dc3
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git cmake make gcc \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /build
RUN git clone https://github.com/Project-HAMi/HAMi-core.git . \
 && git checkout "${HAMI_CORE_COMMIT}"
# Link against the CUDA driver and NVML stubs; the real libraries come from the node at run time.
ENV LIBRARY_PATH=/usr/local/cuda/lib64/stubs
RUN cmake -S . -B out -DCMAKE_BUILD_TYPE=Release \
 && cmake --build out --target vgpu strip_symbol -j"$(nproc)" \
 && test -f out/libvgpu.so

# ---- the host layout the allocator mounts from (device_manager/allocator/responses/nvidia.py):
#      <data>/operator/lib/nvidia/cuda-<major>/libvgpu.so and <data>/operator/lib/nvidia/ld.so.preload ----
FROM ${PYTHON_IMAGE} AS libs
COPY --from=hami-core-cuda-12 /build/out/libvgpu.so /opt/gpustack/lib/nvidia/cuda-12/libvgpu.so
# The preload file names the library where the allocator mounts it inside the container.
RUN echo /usr/local/vgpu/libvgpu.so > /opt/gpustack/lib/nvidia/ld.so.preload \
 && chmod -R a+rX /opt/gpustack/lib

# ---- the image ----
FROM ${PYTHON_IMAGE}
# No libudev: the device manager reads udev's product names from /run/udev/data itself (detector/pci.py).
COPY --from=builder /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links=/wheels gpustack-operator \
 && rm -rf /wheels
COPY --from=libs /opt/gpustack/lib /opt/gpustack/lib
# The worker runs as this user under the restricted security context; the device-manager DaemonSet runs
# the same image privileged as root.
USER 65532:65532
ENTRYPOINT ["gpustack-operator"]
CMD ["--help"]
