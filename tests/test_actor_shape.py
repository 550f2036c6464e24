"""How actors ask for resources: a GPU each, or a share of the CPUs with torch threads to match."""

from orchestrator.actor import actor_shape


def test_gpu_actor_takes_one_gpu() -> None:
    shape = actor_shape(gpus=4, cpus=32, actors=4)
    assert (shape.num_gpus, shape.threads) == (1, None)


def test_single_cpu_actor_leaves_a_core_to_ray() -> None:
    assert actor_shape(gpus=0, cpus=2, actors=1).threads == 1
    assert actor_shape(gpus=0, cpus=16, actors=1).threads == 15
    assert actor_shape(gpus=0, cpus=1, actors=1).threads == 1


def test_cpu_share_split_between_actors() -> None:
    shape = actor_shape(gpus=0, cpus=8, actors=2)
    assert (shape.num_cpus, shape.threads) == (4, 4)
