"""The CrossGuard policy pack: slice-shape and safety rules, also run offline by ``slicectl preview``."""
