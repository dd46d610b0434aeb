"""What every run obeys, whatever IO manager writes its values: its code version, and the fence
that lets only the newest run of a partition write into its input (``io_managers/fleet.py``).
Each product's IO managers are in its folder (``assets/proximity/io_manager.py``)."""
