"""Reports: the network summary now, tiling/memory/run results as the build
adds them. report.json is the diffable record; rich tables are the view."""
