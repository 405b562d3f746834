"""``rescue-train compare``: rebalancing strategies x test folds x seeds, with statistics you can trust.

    rescue-train compare recipe=rpp_cls strategies=[none,inverse_freq,posthoc_la] seeds=[0,1] learner=sklearn
    rescue-train compare recipe=rpp_lora model=qwen2.5-7b-instruct strategies=[sqrt_sampling,inverse_freq] \
        train.max_steps=300 seeds=[0,1,2]

Each test fold of the grouped k-fold manifest takes its turn (validation = the next fold, train = the
rest). A classifier recipe trains in this process; a LoRA recipe trains each run through the ordinary
training path (``accelerate launch ... rescue_train train``) and ranks its test fold's candidates with
``rescue-train eval run=RUN protocol=rank`` (the run's own data configuration). Every finished (strategy, fold, seed) run is one JSON file
under ``OUT/runs/``, written atomically, so an interrupted comparison resumes where it stopped; a hash of
the settings that shape a run refuses to mix runs made under other settings. Predictions of all test folds
are pooled (each instance is predicted once per seed by a model that never saw its unit), scored per seed
and averaged over seeds. ``rescue-train compare merge=[DIR,DIR,...]`` puts finished comparisons of one
task (classifiers and LLMs) into one table.

Parts: :mod:`.config` (settings), :mod:`.runner` (runs and the comparison), :mod:`.lora` (one LoRA run),
:mod:`.stats` (metrics, intervals, tests), :mod:`.report` (markdown and plots), :mod:`.merge`. The command
is ``rescue_train.cli.compare``.
"""
