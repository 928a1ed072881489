# The dialect of the paper authors' code, with a bound over Spot's 8-bit SERE limit.
(define until-300
    (:states
        (step (:text "[Step]"))
        (done (:text "[Done]")))
    (:behavior (until_300 step done)))
