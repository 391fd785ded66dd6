"""Data: the datasets (files, reference sha256 in ``data_files.tsv``, readers, fetch sources, the content
check) and where ``bench resources build`` puts the attacks' and methods' resources."""
