import draftlattice


def test_format_error_is_value_error():
    assert issubclass(draftlattice.FormatError, ValueError)
