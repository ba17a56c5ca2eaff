module gpustack-operator/bench/floor

go 1.24
