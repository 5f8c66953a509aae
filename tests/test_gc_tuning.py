"""Garbage collection for work that allocates much: an experiment run, a server, a Ray worker."""

from __future__ import annotations

import gc

from jurist.gc_tuning import GC_YOUNG, ServingGC, fewer_collections, tune_gc


def test_a_block_of_work_runs_with_fewer_collections_and_the_setting_is_put_back():
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        with fewer_collections(5000):
            assert gc.get_threshold() == (5000, 10, 10)
            with fewer_collections(5000):  # a run inside another leaves it to the outer one
                assert gc.get_threshold() == (5000, 10, 10)
            assert gc.get_threshold() == (5000, 10, 10)
        assert gc.get_threshold() == (700, 10, 10)
        with fewer_collections(5000):
            gc.set_threshold(900, 10, 10)  # changed meanwhile: kept
        assert gc.get_threshold() == (900, 10, 10)
        gc.set_threshold(20000, 10, 10)
        with fewer_collections(5000):  # already higher: left alone
            assert gc.get_threshold() == (20000, 10, 10)
        assert gc.get_threshold() == (20000, 10, 10)
    finally:
        gc.set_threshold(*before)


def test_a_worker_freezes_what_it_built_and_collects_young_objects_less_often():
    before = gc.get_threshold()
    try:
        tune_gc()
        assert gc.get_threshold() == (GC_YOUNG, *before[1:])
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_servers_that_overlap_keep_the_setting_until_the_last_one_stops():
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        first, second = ServingGC(), ServingGC()
        first.start()
        assert gc.get_threshold() == (GC_YOUNG, 10, 10) and gc.get_freeze_count() > 0
        second.start()
        first.stop()
        first.stop()  # stopping twice counts once
        assert gc.get_threshold() == (GC_YOUNG, 10, 10)  # the second still serves
        second.stop()
        assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0
        ServingGC().stop()  # never started: nothing to undo
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
